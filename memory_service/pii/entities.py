"""Names of the entity types the masker detects, and which detection tier finds each one."""

SECRET = "SECRET"
EMAIL_ADDRESS = "EMAIL_ADDRESS"
CREDIT_CARD = "CREDIT_CARD"
IBAN_CODE = "IBAN_CODE"
IP_ADDRESS = "IP_ADDRESS"
PHONE_NUMBER = "PHONE_NUMBER"
JP_MY_NUMBER = "JP_MY_NUMBER"
JP_POSTAL_CODE = "JP_POSTAL_CODE"
ADDRESS = "ADDRESS"
PERSON = "PERSON"
LOCATION = "LOCATION"

#: Found by patterns and checksums; always loaded.
REGEX_ENTITIES: tuple[str, ...] = (
    SECRET,
    EMAIL_ADDRESS,
    CREDIT_CARD,
    IBAN_CODE,
    IP_ADDRESS,
    PHONE_NUMBER,
    JP_MY_NUMBER,
    JP_POSTAL_CODE,
    ADDRESS,
)

#: Found only by a named-entity-recognition model (the optional "ner" tier).
NER_ENTITIES: tuple[str, ...] = (PERSON, LOCATION)

#: Every entity type a policy may name.
ENTITY_TYPES: tuple[str, ...] = REGEX_ENTITIES + NER_ENTITIES
