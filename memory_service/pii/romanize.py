"""Latin spellings of names written in other scripts or with diacritics, for the name lexicon.

An English note writes "Oleksandr", "Yulia Bondarenko" or "Ozturk", while the name lists behind the
lexicon (``names.build_lexicon``) hold "Олександр", "Юлія" and "Öztürk". These functions give the
usual Latin forms, so that the lexicon knows the names as English text spells them. They run when
the lexicon file is built, never on a note.
"""

import unicodedata

# Russian-style romanisation (close to BGN/PCGN, as passports and English texts spell most names),
# also used for Bulgarian and Macedonian names, with the letters those alphabets add.
_RUSSIAN = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh", "з": "z", "и": "i",
    "й": "y", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t",
    "у": "u", "ф": "f", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "", "ы": "y", "ь": "",
    "э": "e", "ю": "yu", "я": "ya", "і": "i", "ї": "yi", "є": "ye", "ґ": "g", "ѓ": "gj", "ќ": "kj",
    "љ": "lj", "њ": "nj", "џ": "dzh", "ј": "j", "ѕ": "dz", "ў": "w",
}  # fmt: skip
# Ukrainian's own (the national system of 2010): г is h, и is y, and є ї й ю я are written
# differently at the start of a name.
_UKRAINIAN = _RUSSIAN | {"г": "h", "и": "y", "і": "i", "ї": "i", "й": "i", "є": "ie", "ю": "iu", "я": "ia", "'": ""}
_UKRAINIAN_INITIAL = {"є": "ye", "ї": "yi", "й": "y", "ю": "yu", "я": "ya"}

# Letters that are not a Latin letter plus marks, and how English text writes them.
_LETTERS = str.maketrans({"ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ı": "i", "ß": "ss", "æ": "ae",
                          "Æ": "Ae", "œ": "oe", "Œ": "Oe", "ð": "d", "þ": "th", "Þ": "Th"})  # fmt: skip

#: Latin spellings of names that English writes for something else: places, peoples, languages,
#: brands, a month (the spellings that an English dictionary's capitalised entries share, less its
#: people). A name written so in its own list stays in the lexicon; only the spelling made here is
#: left out.
NOT_NAMES = frozenset(
    {"Africa", "Alamo", "Armenia", "Catalan", "Goa", "Hong", "Islam", "Israels", "Judea", "Kalashnikov", "Las",
     "Latin", "Magi", "Mir", "Montana", "Nikon", "November", "Novembers", "Pravda", "Purina", "Rio", "Romans",
     "Sanka", "Slav", "Slovak", "Uranus", "Ursa", "Vikings", "Vlasic"}
)  # fmt: skip

#: Locales (Faker's person providers) whose names are written in Cyrillic, and how each is romanised.
CYRILLIC_LOCALES = ("ru_RU", "uk_UA", "bg_BG", "mk_MK")


def without_diacritics(name: str) -> str:
    """``name`` with its accents and other combining marks removed, and letters such as ł and ı
    written as English text does ("Öztürk" → "Ozturk", "Vũ" → "Vu", "Łukasz" → "Lukasz")."""
    decomposed = unicodedata.normalize("NFKD", name.translate(_LETTERS))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def romanised(name: str, locale: str) -> set[str]:
    """The Latin spellings of a Cyrillic ``name`` of ``locale`` (one of ``CYRILLIC_LOCALES``): the
    Russian-style one, and for Ukrainian names also the national one ("Юлія" → "Yuliia" and
    "Yuliya"). Empty when a character has no Latin form here."""
    tables = [(_RUSSIAN, {})] + ([(_UKRAINIAN, _UKRAINIAN_INITIAL)] if locale == "uk_UA" else [])
    spellings = set()
    for table, initial in tables:
        letters = []
        for index, char in enumerate(name.lower()):
            latin = initial.get(char) if index == 0 else None
            latin = latin if latin is not None else table.get(char, char if char in "-’" else None)
            if latin is None:
                break
            letters.append(latin)
        else:
            spelling = "-".join(part[:1].upper() + part[1:] for part in "".join(letters).split("-"))
            if spelling.strip("-’"):
                spellings.add(spelling)
    return spellings
