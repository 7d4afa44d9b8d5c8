"""The API's JSON parser."""

from rest_framework.parsers import JSONParser

from memory_service.exceptions import ValidationError
from memory_service.inputs import TOO_DEEP, check_json_document


class JsonParser(JSONParser):
    """DRF's JSON parser that also refuses, with 400, documents nested deeper than
    MAX_JSON_DEPTH (or too deep for Python's parser to read) and lone surrogates anywhere."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            document = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ValidationError(TOO_DEEP) from exc
        check_json_document(document)
        return document
