"""The recognizers of the regex tier: Presidio's own where they fit, and ours for the rest.

All of them run on normalised text (see ``normalize.py``): ASCII digits and punctuation, no
zero-width characters. Presidio's patterns use ``\\b`` and ``\\w``, which count kana and kanji as
word characters, so ``連絡先はtaro@example.jpまで`` would be one "word"; its recognizers here
therefore match with ASCII semantics. Our own patterns spell their boundaries out with ASCII
classes for the same reason.

Presidio's recognizers used: email (its domain checked against tldextract's bundled public suffix
snapshot, never fetched), credit card (Luhn), IBAN (checksum), IP (``ipaddress``) and phone
(``phonenumbers``, with Japan added to the regions). Ours: secrets, Japanese phone numbers, My
Number (check digit), 〒 postal codes and addresses.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import regex
import tldextract
from presidio_analyzer import EntityRecognizer, LocalRecognizer, Pattern, RecognizerResult
from presidio_analyzer.nlp_engine import NlpArtifacts
from presidio_analyzer.predefined_recognizers import (
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
)

from memory_service.pii.entities import (
    ADDRESS,
    CREDIT_CARD,
    DATE_OF_BIRTH,
    JP_MY_NUMBER,
    JP_POSTAL_CODE,
    PASSPORT,
    PHONE_NUMBER,
    SECRET,
    US_SSN,
)

#: Flags for Presidio's patterns: ``\\b``, ``\\w`` and ``\\d`` with ASCII meaning (see module doc).
ASCII_FLAGS = regex.ASCII | regex.IGNORECASE | regex.MULTILINE | regex.DOTALL

#: Hyphen-like characters NFKC keeps as they are (hyphen, dashes, minus sign, prolonged sound mark).
DASH = r"[\-\u2010-\u2015\u2212\u30fc]"


@dataclass(frozen=True)
class Rule:
    """One pattern of a ``RuleRecognizer``.

    ``group`` names the part of a match that is the entity (``0``: all of it), so ``password=x``
    masks only ``x``. ``validate`` gets the match and returns whether it is really the entity.
    """

    name: str
    pattern: regex.Pattern[str]
    score: float = 1.0
    group: int | str = 0
    validate: Callable[[regex.Match[str]], bool] | None = None


class RuleRecognizer(LocalRecognizer):
    """Finds one entity type with regular expressions, each optionally validated."""

    def __init__(self, *, entity: str, rules: Sequence[Rule], language: str, name: str) -> None:
        self.rules = tuple(rules)
        super().__init__(supported_entities=[entity], supported_language=language, name=name)

    def load(self) -> None:
        """Nothing to load: the patterns are compiled at import."""

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        """Every validated match of every rule, as a result spanning the rule's group."""
        results = []
        for rule in self.rules:
            for match in rule.pattern.finditer(text):
                start, end = match.span(rule.group)
                if start == end or (rule.validate is not None and not rule.validate(match)):
                    continue
                results.append(
                    RecognizerResult(
                        entity_type=self.supported_entities[0],
                        start=start,
                        end=end,
                        score=rule.score,
                        recognition_metadata={
                            RecognizerResult.RECOGNIZER_NAME_KEY: self.name,
                            RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                        },
                    )
                )
        return EntityRecognizer.remove_duplicates(results)


# --- Secrets ------------------------------------------------------------------------------------

_SECRET_KEY_NAME = (
    r"(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|secret[_\-]?key"
    r"|private[_\-]?key|client[_\-]?secret|credentials?)"
)
# A value that names where the secret comes from, or says there is none, is not a secret.
_PLACEHOLDER = regex.compile(
    r"""
    \$\{?[A-Za-z_][A-Za-z0-9_]*\}?                          # $VAR, ${VAR}
    | \{\{.*\}\} | \{[A-Za-z_]*\} | %\(?[A-Za-z_]*\)?s      # templates
    | <[^>]*> | \[[^\]]*\]                                  # <your-token>, <SECRET>, [redacted]
    | [*x.\u2022\u2026_\-]+                                 # ****, xxxx, ...
    | (?:self|settings|config|conf|cfg|os|env|process|request|args|options|opts|params|ctx|secrets|vault)
      (?:\.[A-Za-z_][A-Za-z0-9_]*)+                         # settings.SECRET_KEY, os.environ
    | none|null|nil|true|false|undefined|empty|redacted|hidden|masked|required|optional
    | str|string|int|bool|bytes|any|object|number|boolean|secretstr
    | the|are|was|not|for|and|from|with|see|set|stored|missing|invalid
    """,
    regex.VERBOSE | regex.IGNORECASE,
)


def _is_secret_value(match: regex.Match[str]) -> bool:
    """The value of ``key=value`` is a secret: not a placeholder, a reference, a call or a type."""
    if match.group("key") in ("PWD", "OLDPWD"):  # the shell's working directory
        return False
    if match.string[: match.start()].endswith("//"):  # URL userinfo: the url_credentials rule's
        return False
    if match.string[match.end() : match.end() + 1] in ("(", "["):  # get_password(), Optional[str]
        return False
    return not _PLACEHOLDER.fullmatch(match.group("v"))


def _is_token_like(match: regex.Match[str]) -> bool:
    """Long, or containing a digit or a symbol: a credential, not a word such as "authentication"."""
    value = match.group("v")
    return len(value) >= 20 or regex.search(r"[0-9._~+/\-]", value) is not None


def _has_digit_and_letter(match: regex.Match[str]) -> bool:
    value = match.group()
    return regex.search(r"[0-9]", value) is not None and regex.search(r"[A-Za-z]", value) is not None


def _url_password_is_real(match: regex.Match[str]) -> bool:
    return not _PLACEHOLDER.fullmatch(match.group("v").partition(":")[2] or "x")


def _secret(name: str, pattern: str, **kwargs) -> Rule:
    return Rule(name=name, pattern=regex.compile(pattern, regex.DOTALL), **kwargs)


SECRET_RULES: tuple[Rule, ...] = (
    _secret(
        "aws_access_key_id",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    _secret(
        "github_token",
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])",
    ),
    _secret("gitlab_token", r"(?<![A-Za-z0-9_\-])gl(?:pat|dt|rt|ptt|ft|soat|cbt)-[A-Za-z0-9_\-]{20,}"),
    _secret("slack_token", r"(?<![A-Za-z0-9_\-])(?:xox[abprs]-[A-Za-z0-9\-]{10,}|xapp-[0-9]-[A-Za-z0-9\-]{10,})"),
    _secret("slack_webhook", r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{8,}"),
    _secret(
        "openai_anthropic_key",
        r"(?<![A-Za-z0-9_\-])sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        validate=_has_digit_and_letter,
    ),
    _secret("google_api_key", r"(?<![A-Za-z0-9_\-])AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])"),
    _secret(
        "stripe_key",
        r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{10,}|(?<![A-Za-z0-9_])whsec_[0-9A-Za-z]{20,}",
    ),
    _secret(
        "npm_pypi_hf_token",
        r"(?<![A-Za-z0-9_])(?:npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_\-]{50,}|hf_[A-Za-z0-9]{30,})(?![A-Za-z0-9_])",
    ),
    _secret("sendgrid_key", r"(?<![A-Za-z0-9_])SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    _secret("jwt", r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
    _secret(
        "private_key_block",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    # This service's own API tokens: an 8-character prefix, a dot, a 32-character secret.
    _secret("service_token", r"(?<![A-Za-z0-9])[A-Za-z0-9]{8}\.[A-Za-z0-9]{32}(?![A-Za-z0-9])"),
    # scheme://user:password@host: the userinfo; a long token alone as userinfo, too.
    _secret(
        "url_credentials",
        r"(?i:[a-z][a-z0-9+.\-]{0,30})://(?P<v>[^\s/?#@:<>\"']{1,256}:[^\s/?#<>\"']{1,256})@(?=[^\s@/?#])",
        group="v",
        validate=_url_password_is_real,
    ),
    _secret("url_token", r"(?i:[a-z][a-z0-9+.\-]{0,30})://(?P<v>[A-Za-z0-9_\-.~%]{20,})@(?=[^\s@/?#])", group="v"),
    _secret(
        "bearer_token",
        r"(?<![A-Za-z0-9])(?i:bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{12,}=*)",
        group="v",
        validate=_is_token_like,
    ),
    _secret(
        "authorization_header",
        r"(?i:authorization)[\"']?[ \t]*[:=][ \t]*[\"']?(?i:basic|token|digest)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{8,}=*)",
        group="v",
    ),
    # password=..., "api_key": "...", DB_PASSWORD: ..., --token=..., clientSecret => '...'
    _secret(
        "key_value",
        rf"""(?<![A-Za-z0-9])(?P<key>[A-Za-z0-9_.\-]{{0,40}}?(?i:{_SECRET_KEY_NAME}))["']?[ \t]*(?:=>|:=|=|:)[ \t]*"""
        rf"""(?:"(?P<v>[^"\r\n]{{3,512}})"|'(?P<v>[^'\r\n]{{3,512}})'|(?P<v>[!#$%&*+\-./0-9:=?@A-Z\\^_a-z|~]{{3,512}}))""",
        score=0.9,
        group="v",
        validate=_is_secret_value,
    ),
    _secret(
        "key_value_ja",
        r"(?:パスワード|暗証番号|トークン|シークレット|APIキー|アクセスキー)[ \t]*(?:[:=]|は)[ \t]*(?P<v>[!-~]{3,256})",
        score=0.9,
        group="v",
        validate=lambda match: not _PLACEHOLDER.fullmatch(match.group("v")),
    ),
)


# --- Japanese phone numbers, My Number, postal codes, addresses --------------------------------

#: Between the groups of a number: a dash, spaces, a bracket, a dot, a slash or an underscore.
_SEP = rf"(?:[ \t]*{DASH}[ \t]*|[ \t]+|[ \t]*\)[ \t]*|\(|[./_])?"
_JP_PHONE = regex.compile(
    rf"""(?<![0-9A-Za-z+.\-])
    (?:(?:\+81{_SEP}(?:\(0\){_SEP})?|\(?0)[1-9][0-9]{{0,3}}{_SEP}[0-9]{{1,4}}{_SEP}[0-9]{{4}}
      |0(?:120|570|800){_SEP}[0-9]{{2,3}}{_SEP}[0-9]{{3,4}})
    (?![0-9A-Za-z]|[\-./_][0-9])""",
    regex.VERBOSE,
)
_MOBILE_PREFIXES = ("020", "050", "060", "070", "080", "090", "0800")


def _is_japanese_phone(match: regex.Match[str]) -> bool:
    """10 digits (landline, 0120, 0570) or 11 (mobile, IP phone, 0800), counted with the trunk 0."""
    value = match.group()
    digits = regex.sub(r"[^0-9]", "", value)
    if value.startswith("+"):
        digits = "0" + digits[2:].removeprefix("0")
    if digits.startswith(_MOBILE_PREFIXES):
        return len(digits) == 11
    return len(digits) == 10


def my_number_is_valid(digits: str) -> bool:
    """Whether 12 digits form a valid My Number (individual number): the official check digit.

    With P(n) the n-th digit counting leftwards from the one before the check digit, and
    Q(n) = n + 1 for n ≤ 6, n − 5 for n ≥ 7: r = Σ P(n)·Q(n) mod 11; the check digit is 0 when
    r ≤ 1, otherwise 11 − r.
    """
    if len(digits) != 12 or not digits.isascii() or not digits.isdigit():
        return False
    total = sum(int(p) * (n + 1 if n <= 6 else n - 5) for n, p in enumerate(reversed(digits[:11]), start=1))
    remainder = total % 11
    return int(digits[11]) == (0 if remainder <= 1 else 11 - remainder)


_MY_NUMBER = regex.compile(
    rf"(?<![0-9A-Za-z+.\-/])[0-9]{{4}}(?P<sep>(?:[ ./_]|{DASH})?)[0-9]{{4}}(?P=sep)[0-9]{{4}}"
    r"(?![0-9A-Za-z]|[\-./_][0-9])"
)

_POSTAL = regex.compile(
    rf"(?:〒[ \t]*|(?:郵便番号|(?i:postal[ \t]?code|post[ \t]?code|zip(?:[ \t]?code)?))[ \t]*[:]?[ \t]*)"
    rf"(?P<v>[0-9]{{3}}{DASH}?[0-9]{{4}})(?![0-9])"
)

_PREFECTURES = (
    "北海道|東京都|大阪府|京都府|(?:青森|岩手|宮城|秋田|山形|福島|茨城|栃木|群馬|埼玉|千葉|神奈川|新潟|富山|石川|福井"
    "|山梨|長野|岐阜|静岡|愛知|三重|滋賀|兵庫|奈良|和歌山|鳥取|島根|岡山|広島|山口|徳島|香川|愛媛|高知|福岡|佐賀|長崎"
    "|熊本|大分|宮崎|鹿児島|沖縄)県"
)
_KANA_KANJI = r"[\p{Han}\p{Hiragana}\p{Katakana}ー々〆ヶ]"
_NUM = r"(?:[0-9]{1,5}|[〇一二三四五六七八九十百千]{1,6})"
# 1-2-3, 3丁目1番1号, 1丁目2-3, 123番地, 5番地の3
_BLOCK = rf"{_NUM}(?:(?:丁目|番地|番|号)(?:{_NUM})?|{DASH}{_NUM}|の{_NUM}){{1,5}}"
_JP_ADDRESS = regex.compile(
    rf"(?:{_PREFECTURES})[ \t]?(?:{_KANA_KANJI}|[ \t]){{0,20}}?[市区町村郡](?:{_KANA_KANJI}|[ \t]){{0,20}}?{_BLOCK}"
    # Without a prefecture: a kanji city or ward, a district name, then block numbers.
    rf"|\p{{Han}}{{1,4}}[市区町村]{_KANA_KANJI}{{1,20}}?{_BLOCK}"
)
_EN_ADDRESS = regex.compile(
    r"(?<![0-9A-Za-z])[0-9]{1,6}[ \t]+(?:[A-Z][a-z]+[ \t]+){1,4}"
    r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Parkway|Pkwy|Place|Pl|Terrace)"
    r"(?![A-Za-z])\.?(?:,?[ \t]+(?:Apt|Suite|Unit)\.?[ \t]*[0-9A-Za-z\-]+)?"
)


# --- Cards, US Social Security numbers, dates of birth, passports ---------------------------------

_DIGIT_SEP = r"[ ./_\-]"
# 13-19 digits: contiguous, or in groups of four (the last one 1-7 long), or Amex's 4-6-5, with one
# separator used throughout.
_CARD = regex.compile(
    rf"""(?<![0-9A-Za-z+.\-/_])
    (?:[2-6][0-9]{{12,18}}
      |[2-6][0-9]{{3}}(?P<sep>{_DIGIT_SEP})[0-9]{{4}}(?P=sep)[0-9]{{4}}(?P=sep)[0-9]{{1,7}}
      |3[47][0-9]{{2}}(?P<amex>{_DIGIT_SEP})[0-9]{{6}}(?P=amex)[0-9]{{5}})
    (?![0-9A-Za-z]|[\-./_][0-9])""",
    regex.VERBOSE,
)


def luhn_is_valid(digits: str) -> bool:
    """Whether a string of ASCII digits passes the Luhn check (every card number does)."""
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _is_card(match: regex.Match[str]) -> bool:
    digits = regex.sub(r"[^0-9]", "", match.group())
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_is_valid(digits)


_SSN = regex.compile(
    rf"(?<![0-9A-Za-z+.\-/_])[0-9]{{3}}(?P<sep>{_DIGIT_SEP})[0-9]{{2}}(?P=sep)[0-9]{{4}}(?![0-9A-Za-z]|[\-./_][0-9])"
)
_SSN_WITH_CONTEXT = regex.compile(
    r"(?i:(?<![A-Za-z])(?:ssn|social[ \t]+security(?:[ \t]+(?:number|no\.?))?))[ \t]*(?:#|:|=|is)?[ \t]*"
    r"(?P<v>[0-9]{9})(?![0-9])"
)
#: Numbers of the SSN shape the Social Security Administration says were never issued or are public.
_SSN_NEVER_ISSUED = frozenset({"123456789", "078051120", "219099999"})


def ssn_is_valid(digits: str) -> bool:
    """A US Social Security number that could be issued: area not 000, 666 or 9xx, group not 00,
    serial not 0000, and not one of the numbers printed in advertisements."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return (
        len(digits) == 9
        and area not in ("000", "666")
        and not area.startswith("9")
        and group != "00"
        and serial != "0000"
        and digits not in _SSN_NEVER_ISSUED
    )


_MONTH = (
    r"(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DATE = (
    r"(?:[0-9]{4}[\-/.][0-9]{1,2}[\-/.][0-9]{1,2}"
    r"|[0-9]{1,2}[\-/.][0-9]{1,2}[\-/.][0-9]{2,4}"
    rf"|{_MONTH}\.?[ \t]+[0-9]{{1,2}}(?:st|nd|rd|th)?,?[ \t]+[0-9]{{4}}"
    rf"|[0-9]{{1,2}}(?:st|nd|rd|th)?[ \t]+{_MONTH}\.?,?[ \t]+[0-9]{{4}}"
    r"|(?:[0-9]{4}|(?:明治|大正|昭和|平成|令和)(?:[0-9]{1,2}|元))年[ \t]*[0-9]{1,2}月[ \t]*[0-9]{1,2}日)"
)
# "born on 1985-04-12", "DOB: 04/12/1985", "生年月日: 1985年4月12日", "1985年4月12日生まれ".
_BIRTH_BEFORE = regex.compile(
    r"(?:(?i:(?<![A-Za-z])(?:born(?:[ \t]+(?:on|in))?|date[ \t]+of[ \t]+birth|d\.?o\.?b\.?|birth[ \t\-]?date|birthday)"
    rf"(?![A-Za-z]))|生年月日|誕生日)[ \t]*(?:[:=]|is|は)?[ \t]*(?P<v>{_DATE})(?![0-9])"
)
_BIRTH_AFTER = regex.compile(rf"(?<![0-9])(?P<v>{_DATE})[ \t]*(?:生まれ|生(?![0-9A-Za-z\p{{Han}}]))")

# "passport TK1234567" (Japan: two letters, seven digits), "passport number 512345678" (US: nine
# digits, or a letter and eight), "旅券番号 TR8429173".
_PASSPORT = regex.compile(
    r"(?:(?i:(?<![A-Za-z])passport(?:[ \t]*(?:no\.?|number|num|#))?)|旅券(?:番号)?|パスポート(?:番号)?)"
    r"[ \t]*(?:[:=#]|is|は)?[ \t]*(?P<v>[A-Za-z]{2}[0-9]{7}|[A-Za-z][0-9]{8}|[0-9]{9})(?![0-9A-Za-z])"
)


def our_recognizers(language: str) -> list[EntityRecognizer]:
    """This project's recognizers for ``language`` (the same patterns serve every language)."""
    return [
        RuleRecognizer(entity=SECRET, rules=SECRET_RULES, language=language, name="SecretRecognizer"),
        RuleRecognizer(
            entity=PHONE_NUMBER,
            rules=[Rule("jp_phone", _JP_PHONE, score=0.7, validate=_is_japanese_phone)],
            language=language,
            name="JpPhoneRecognizer",
        ),
        RuleRecognizer(
            entity=JP_MY_NUMBER,
            rules=[
                Rule(
                    "my_number",
                    _MY_NUMBER,
                    score=0.9,
                    validate=lambda match: my_number_is_valid(regex.sub(r"[^0-9]", "", match.group())),
                )
            ],
            language=language,
            name="JpMyNumberRecognizer",
        ),
        RuleRecognizer(
            entity=JP_POSTAL_CODE,
            rules=[Rule("jp_postal_code", _POSTAL, score=0.9, group="v")],
            language=language,
            name="JpPostalCodeRecognizer",
        ),
        RuleRecognizer(
            entity=CREDIT_CARD,
            rules=[Rule("card", _CARD, score=0.9, validate=_is_card)],
            language=language,
            name="CardRecognizer",
        ),
        RuleRecognizer(
            entity=US_SSN,
            rules=[
                Rule("us_ssn", _SSN, score=0.8, validate=lambda m: ssn_is_valid(regex.sub(r"[^0-9]", "", m.group()))),
                Rule(
                    "us_ssn_context",
                    _SSN_WITH_CONTEXT,
                    score=0.9,
                    group="v",
                    validate=lambda m: ssn_is_valid(m.group("v")),
                ),
            ],  # fmt: skip
            language=language,
            name="UsSsnRecognizer",
        ),
        RuleRecognizer(
            entity=DATE_OF_BIRTH,
            rules=[
                Rule("birth_context_before", _BIRTH_BEFORE, score=0.9, group="v"),
                Rule("birth_context_after", _BIRTH_AFTER, score=0.9, group="v"),
            ],
            language=language,
            name="DateOfBirthRecognizer",
        ),
        RuleRecognizer(
            entity=PASSPORT,
            rules=[Rule("passport", _PASSPORT, score=0.9, group="v")],
            language=language,
            name="PassportRecognizer",
        ),
        RuleRecognizer(
            entity=ADDRESS,
            rules=[Rule("jp_address", _JP_ADDRESS, score=0.8), Rule("en_street_address", _EN_ADDRESS, score=0.6)],
            language=language,
            name="AddressRecognizer",
        ),
    ]


# --- Presidio's recognizers, configured -------------------------------------------------------


def _fresh(patterns: Sequence[Pattern]) -> list[Pattern]:
    """Copies, so the compiled-pattern cache on Presidio's class-level patterns is not shared."""
    return [Pattern(name=pattern.name, regex=pattern.regex, score=pattern.score) for pattern in patterns]


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's email recognizer with an ASCII pattern, whose domain check uses tldextract's
    bundled public suffix snapshot: no suffix list is ever fetched, nor cached on disk.

    The local part excludes ``=`` and ``:`` (legal but rare), so ``email=bob@example.com`` masks
    the address and keeps the key. Internationalised domains are not matched.
    """

    PATTERNS = [
        Pattern(
            "Email (ASCII)",
            r"\b[A-Za-z0-9](?:[A-Za-z0-9._%+\-]{0,62}[A-Za-z0-9_%+\-])?"
            r"@[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?)+\b",
            0.5,
        )
    ]
    _suffixes = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)

    def __init__(self, *, language: str) -> None:
        super().__init__(patterns=_fresh(self.PATTERNS), supported_language=language)
        self.global_regex_flags = ASCII_FLAGS

    def validate_result(self, pattern_text: str) -> bool:
        """The domain ends in a known public suffix (``react@18.2.0`` and ``a@b.local`` do not)."""
        return self._suffixes(pattern_text.rpartition("@")[2]).fqdn != ""


class GuardedPhoneRecognizer(PhoneRecognizer):
    """Presidio's phone recognizer (``phonenumbers``, Japan added to its regions), run only on
    windows around runs of at least seven digits.

    The matcher tries every region on every number-like string (versions, dates, ports), which
    costs milliseconds per note; a window keeps a few characters either side of the run, enough
    for the matcher's own checks of what precedes and follows a number.
    """

    REGIONS = (*PhoneRecognizer.DEFAULT_SUPPORTED_REGIONS, "JP")
    _RUN = regex.compile(rf"[0-9](?:(?:[ \t().+/]|{DASH}){{0,3}}[0-9]){{6,}}")
    _BEFORE, _AFTER = 6, 3

    def __init__(self, *, language: str) -> None:
        super().__init__(supported_language=language, supported_regions=self.REGIONS)

    def analyze(
        self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None
    ) -> list[RecognizerResult]:
        """Phone numbers valid in one of ``REGIONS`` (or carrying a country code)."""
        results = []
        for start, end in self._windows(text):
            for result in super().analyze(text[start:end], entities, nlp_artifacts):
                result.start += start
                result.end += start
                results.append(result)
        return results

    def _windows(self, text: str) -> list[tuple[int, int]]:
        windows: list[tuple[int, int]] = []
        for match in self._RUN.finditer(text):
            start, end = max(0, match.start() - self._BEFORE), min(len(text), match.end() + self._AFTER)
            if windows and start <= windows[-1][1]:
                windows[-1] = (windows[-1][0], end)
            else:
                windows.append((start, end))
        return windows


def presidio_recognizers(language: str) -> list[EntityRecognizer]:
    """Presidio's email, IBAN, IP and phone recognizers for ``language``."""
    ip = IpRecognizer(patterns=_fresh(IpRecognizer.PATTERNS), supported_language=language)
    ip.global_regex_flags = ASCII_FLAGS
    iban = IbanRecognizer(patterns=_fresh(IbanRecognizer.PATTERNS), supported_language=language)
    return [
        OfflineEmailRecognizer(language=language),
        iban,
        ip,
        GuardedPhoneRecognizer(language=language),
    ]
