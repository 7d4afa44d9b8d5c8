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
US_SSN = "US_SSN"
DATE_OF_BIRTH = "DATE_OF_BIRTH"
PASSPORT = "PASSPORT"
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
    US_SSN,
    DATE_OF_BIRTH,
    PASSPORT,
)

#: Found only by the name tier ("ner"). LOCATION is masked only when a policy names it: place
#: names in engineering notes are mostly regions and data centres, not personal data.
NER_ENTITIES: tuple[str, ...] = (PERSON, LOCATION)
OPT_IN_ENTITIES: frozenset[str] = frozenset({LOCATION})

#: Values a checksum, a required context or a fixed shape proves: never dropped for lying inside a
#: harmless code string (a card written as ``4111.1111.1111.1111`` is not a version number).
CERTAIN_ENTITIES: frozenset[str] = frozenset(
    {SECRET, CREDIT_CARD, IBAN_CODE, JP_MY_NUMBER, US_SSN, DATE_OF_BIRTH, PASSPORT}
)

#: Every entity type a policy may name.
ENTITY_TYPES: tuple[str, ...] = REGEX_ENTITIES + NER_ENTITIES
