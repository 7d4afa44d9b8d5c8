"""Latin spellings of names written in other scripts or with diacritics, for the name lexicon.

An English note writes "Oleksandr", "Yulia Bondarenko", "Pradeep", "Abhishek" or "Ozturk", while the
name lists behind the lexicon (``names.build_lexicon``) hold "Олександр", "Юлія", "प्रदीप", "অভিষেক"
and "Öztürk". These functions give the usual Latin forms, so that the lexicon knows the names as
English text spells them. They run when the lexicon file is built, never on a note.
"""

import unicodedata

# Russian-style romanisation (close to BGN/PCGN, as passports and English texts spell most names),
# also used for Macedonian names, with the letters its alphabet adds; apostrophes are dropped.
_RUSSIAN = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh", "з": "z", "и": "i",
    "й": "y", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t",
    "у": "u", "ф": "f", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "", "ы": "y", "ь": "",
    "э": "e", "ю": "yu", "я": "ya", "і": "i", "ї": "yi", "є": "ye", "ґ": "g", "ѓ": "gj", "ќ": "kj",
    "љ": "lj", "њ": "nj", "џ": "dzh", "ј": "j", "ѕ": "dz", "ў": "w", "'": "", "ʼ": "", "’": "",
}  # fmt: skip
# A Russian name starting with е is written both ways in English: Elena and Yelena.
_RUSSIAN_INITIAL = {"е": "ye"}
# Bulgarian's own (its official system of 2009): ъ is a vowel, щ is sht, х is h.
_BULGARIAN = _RUSSIAN | {"ъ": "a", "щ": "sht", "х": "h"}
# Ukrainian's own (the national system of 2010): г is h, и is y, and є ї й ю я are written
# differently at the start of a name.
_UKRAINIAN = _RUSSIAN | {"г": "h", "и": "y", "і": "i", "ї": "i", "й": "i", "є": "ie", "ю": "iu", "я": "ia"}
_UKRAINIAN_INITIAL = {"є": "ye", "ї": "yi", "й": "y", "ю": "yu", "я": "ya"}
# The (table, letters at the start of a name or of a part after a hyphen) of each Cyrillic locale
# (Faker's person providers).
_SYSTEMS = {
    "ru_RU": ((_RUSSIAN, {}), (_RUSSIAN, _RUSSIAN_INITIAL)),
    "uk_UA": ((_RUSSIAN, {}), (_UKRAINIAN, _UKRAINIAN_INITIAL)),
    "bg_BG": ((_BULGARIAN, {}),),
    "mk_MK": ((_RUSSIAN, {}),),
}
#: Locales whose names are written in Cyrillic.
CYRILLIC_LOCALES = tuple(_SYSTEMS)

# Devanagari (Hindi, Marathi, Nepali names), as English text spells Indian and Nepali names: no
# diacritics, aspirates with h, ष and श both sh. A consonant carries the vowel a unless a vowel
# sign or the virama (्) follows it; at the end of a name that a is not spoken (विक्रम → Vikram)
# unless the name ends in a cluster (मिश्र → Mishra). The long vowels ई and ऊ are written both
# ways: i / u, and ee / oo (प्रदीप → Pradip, Pradeep).
# (NFC keeps a consonant with a nukta, क़, as two code points: the keys are normalised to match.)
_DEVANAGARI_CONSONANTS = {unicodedata.normalize("NFC", letter): spelling for letter, spelling in {
    "क": "k", "ख": "kh", "ग": "g", "घ": "gh", "ङ": "n", "च": "ch", "छ": "chh", "ज": "j", "झ": "jh", "ञ": "n",
    "ट": "t", "ठ": "th", "ड": "d", "ढ": "dh", "ण": "n", "त": "t", "थ": "th", "द": "d", "ध": "dh", "न": "n",
    "प": "p", "फ": "ph", "ब": "b", "भ": "bh", "म": "m", "य": "y", "र": "r", "ल": "l", "ळ": "l", "व": "v",
    "श": "sh", "ष": "sh", "स": "s", "ह": "h", "क़": "q", "ख़": "kh", "ग़": "gh", "ज़": "z", "ड़": "r", "ढ़": "rh",
    "फ़": "f", "य़": "y",
}.items()}  # fmt: skip
_DEVANAGARI_VOWELS = {  # independent letter, vowel sign → (short spelling, long spelling)
    "अ": ("a", "a"), "आ": ("a", "a"), "ा": ("a", "a"), "इ": ("i", "i"), "ि": ("i", "i"), "ई": ("i", "ee"),
    "ी": ("i", "ee"), "उ": ("u", "u"), "ु": ("u", "u"), "ऊ": ("u", "oo"), "ू": ("u", "oo"), "ऋ": ("ri", "ri"),
    "ृ": ("ri", "ri"), "ए": ("e", "e"), "े": ("e", "e"), "ऐ": ("ai", "ai"), "ै": ("ai", "ai"), "ओ": ("o", "o"),
    "ो": ("o", "o"), "औ": ("au", "au"), "ौ": ("au", "au"), "ऑ": ("o", "o"), "ॉ": ("o", "o"),
}  # fmt: skip
_VIRAMA, _NUKTA = "\u094d", "\u093c"
# Nasal and other signs: the anusvara (ं) is m before a labial, ng before ह (सिंह → Singh), n elsewhere.
_DEVANAGARI_SIGNS = {"ं": "n", "ँ": "n", "ः": "h"}
_ANUSVARA_BEFORE = {**dict.fromkeys("पफबभम", "m"), "ह": "ng"}
# Where each locale's script starts in Unicode. The Indic blocks share one layout (that of ISCII):
# the letter at an offset in Bengali, Gujarati or Odia is the one at that offset in Devanagari
# (অজয় / અજય / ଅଜୟ → अजय → Ajay), so their names are spelt by Devanagari's rules; a letter of
# their own with no Devanagari counterpart leaves the name without a spelling.
_INDIC_BLOCKS = {"hi_IN": 0x0900, "mr_IN": 0x0900, "ne_NP": 0x0900, "bn_BD": 0x0980, "gu_IN": 0x0A80, "or_IN": 0x0B00}
#: Locales whose names are written in an Indic script.
INDIC_LOCALES = tuple(_INDIC_BLOCKS)

# Letters that are not a Latin letter plus marks, and how English text writes them.
_LETTERS = str.maketrans(
    {"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ı": "i", "ß": "ss", "æ": "ae", "Æ": "Ae",
     "œ": "oe", "Œ": "Oe", "ð": "d", "þ": "th", "Þ": "Th", "ə": "a", "Ə": "A"}
)  # fmt: skip

#: Latin spellings of names that English writes for something else: places, peoples, languages,
#: brands, a month (the spellings that an English dictionary's capitalised entries share, less its
#: people). A name written so in its own list stays in the lexicon; only the spelling made here is
#: left out.
NOT_NAMES = frozenset(
    {"Africa", "Alamo", "Armenia", "Catalan", "Goa", "Hong", "Islam", "Israels", "Judea", "Kalashnikov", "Las",
     "Latin", "Magi", "Mir", "Montana", "Nikon", "November", "Novembers", "Pravda", "Purina", "Rio", "Romans",
     "Sanka", "Slav", "Slovak", "Uranus", "Ursa", "Vikings", "Vlasic"}
)  # fmt: skip


def without_diacritics(name: str) -> str:
    """``name`` with its accents and other combining marks removed, and letters such as ł and ı
    written as English text does ("Öztürk" → "Ozturk", "Vũ" → "Vu", "Łukasz" → "Lukasz")."""
    decomposed = unicodedata.normalize("NFKD", name.translate(_LETTERS))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def romanised(name: str, locale: str) -> set[str]:
    """The Latin spellings of a Cyrillic ``name`` of ``locale`` (one of ``CYRILLIC_LOCALES``): for
    Russian names with е first both ways ("Елена" → "Elena", "Yelena"), for Ukrainian names the
    Russian-style one and the national one ("Юлія" → "Yuliya", "Yuliia"), for Bulgarian names
    Bulgaria's own ("Щерев" → "Shterev"). Empty when a character has no Latin form here."""
    spellings = set()
    for table, initial in _SYSTEMS[locale]:
        parts = []
        for part in name.lower().split("-"):
            letters = [initial.get(part[:1]) or table.get(part[:1])] + [table.get(char) for char in part[1:]]
            if not part or any(letter is None for letter in letters):
                break
            spelt = "".join(letters)
            parts.append(spelt[:1].upper() + spelt[1:])
        else:
            spellings.add("-".join(parts))
    return spellings


def devanagari_romanised(name: str) -> set[str]:
    """The Latin spellings of a Devanagari ``name``, with ई / ऊ as i / u and as ee / oo
    ("विक्रम" → "Vikram"; "प्रदीप" → "Pradip", "Pradeep"; "सुनीता" → "Sunita", "Suneeta";
    "मिश्र" → "Mishra"). Empty when a character is not one this table knows."""
    text = unicodedata.normalize("NFC", name)
    silent_a = _silent_final_a(text)
    spellings = set()
    for long in (False, True):
        letters, index = [], 0
        while index < len(text):
            char = text[index]
            if text[index + 1 : index + 2] == _NUKTA and char + _NUKTA in _DEVANAGARI_CONSONANTS:
                char, index = char + _NUKTA, index + 1
            index += 1
            if char in _DEVANAGARI_CONSONANTS:
                following = text[index : index + 1]
                letters.append(_DEVANAGARI_CONSONANTS[char])
                if following == _VIRAMA:
                    index += 1
                elif following not in _DEVANAGARI_VOWELS:
                    letters.append("a")  # the inherent vowel
            elif char in _DEVANAGARI_VOWELS:
                letters.append(_DEVANAGARI_VOWELS[char][long])
            elif char in _DEVANAGARI_SIGNS:
                before = _ANUSVARA_BEFORE.get(text[index : index + 1]) if char == "ं" else None
                letters.append(before or _DEVANAGARI_SIGNS[char])
            else:
                break
        else:
            spelt = "".join(letters)
            if silent_a:
                spelt = spelt[:-1]
            if spelt:
                spellings.add(spelt[:1].upper() + spelt[1:])
    return spellings


def _silent_final_a(text: str) -> bool:
    """Whether the name ends in a lone consonant, whose inherent a is not spoken (विक्रम); after a
    cluster it is (मिश्र, इन्द्र), and a name ending in a vowel sign has no inherent a to drop."""
    last = len(text) - (2 if text.endswith(_NUKTA) else 1)
    if last < 0 or text[last:] not in _DEVANAGARI_CONSONANTS:
        return False
    return last == 0 or text[last - 1] != _VIRAMA


def indic_romanised(name: str, locale: str) -> set[str]:
    """The Latin spellings of ``name`` of ``locale`` (one of ``INDIC_LOCALES``), its letters read as
    the Devanagari ones at the same place in their block (``devanagari_romanised``)."""
    start = _INDIC_BLOCKS[locale]
    shifted = "".join(chr(ord(c) - start + 0x0900) if start <= ord(c) < start + 0x80 else c for c in name)
    return devanagari_romanised(shifted)
