"""Full-text documents and queries (no database)."""

from datetime import UTC, datetime

from memory_service.retrieval.lexical import is_stop_term, lexical_document, lexical_query, lexical_terms


def test_it_splits_japanese_into_bigrams_and_lowercases_words():
    assert lexical_terms("接続エラー in Redis", stemmed=False) == ["接続", "続エ", "エラ", "ラー", "in", "redis"]


def test_it_indexes_the_memorys_date():
    document = lexical_document(title="", text="deploy", tags=[], occurred_at=datetime(2024, 3, 5, tzinfo=UTC))
    assert document.split() == ["deploy", "2024", "03", "05", "2024", "03", "2024", "march"]


def test_a_query_leaves_out_stop_words_and_hiragana_bigrams():
    assert lexical_query("how did we fix the S3 upload?") == "'fix' | 's3' | 'upload'"
    assert lexical_query("接続はどうした") == "'接続' | '続は'"
    assert is_stop_term("した") and not is_stop_term("データ"[:2])


def test_a_query_of_stop_terms_only_keeps_them():
    assert lexical_query("the") == "'the'"
    assert lexical_query("どうした") == "'どう' | 'うし' | 'した'"


def test_no_query_character_becomes_tsquery_syntax():
    assert lexical_query("o'neil & b | !c:*") == "'o' | 'neil' | 'b' | 'c'"


def test_words_are_indexed_and_queried_by_their_english_stems():
    assert lexical_terms("Classes about driving, 42 pottery classes") == [
        "class",
        "about",
        "drive",
        "42",
        "potteri",
        "class",
    ]
    assert lexical_terms("Driving", stemmed=False) == ["driving"]
    # Stop words are left out before stemming ("does" would stem to "doe").
    assert lexical_query("Does she still take driving classes?") == "'still' | 'take' | 'drive' | 'class'"


def test_a_masked_value_is_queried_by_its_pseudonym_never_by_its_label_s_words():
    assert lexical_query("What did <PERSON_48b61a8eb353> fix at <LOCATION>?") == "'48b61a8eb353' | 'fix'"
    assert lexical_query("mail <EMAIL_ADDRESS_8cb238f10ec1> the <SECRET>") == "'mail' | '8cb238f10ec1'"
    assert lexical_query("who is the contact person") == "'contact' | 'person'"  # a word typed is a word
    assert lexical_query("<PERSON>") == ""
