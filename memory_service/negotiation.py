"""Content negotiation that never answers 406.

Some endpoints answer markdown (AGENTS.md, the session context) as plain Django responses; a
client sending ``Accept: text/markdown`` must reach them, and errors then come back in the one
JSON error shape rather than as a 406.
"""

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation


class LenientContentNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request, renderers, format_suffix=None):
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            return renderers[0], renderers[0].media_type
