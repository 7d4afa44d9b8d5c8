from memory_service.pii.normalize import detect_language, normalize


def test_it_keeps_ascii_text_and_its_offsets():
    normalized = normalize("mail bob@example.com")

    assert normalized.text == "mail bob@example.com"
    assert normalized.original_span(5, 20) == (5, 20)


def test_it_folds_full_width_characters():
    assert normalize("０９０－１２３４－５６７８").text == "090-1234-5678"
    assert normalize("ａ＠ｂ．ｊｐ").text == "a@b.jp"


def test_it_removes_zero_width_characters_and_maps_offsets_back():
    original = "x ali\u200bce@exa\u00admple.com\ufeff!"
    normalized = normalize(original)

    assert normalized.text == "x alice@example.com!"
    start, end = normalized.original_span(2, 19)
    assert original[start:end] == "ali\u200bce@exa\u00admple.com"


def test_it_maps_a_span_inside_a_cluster_expansion_to_the_whole_cluster():
    original = "㍻3年"
    normalized = normalize(original)

    assert normalized.text == "平成3年"
    assert normalized.original_span(1, 3) == (0, 2)


def test_it_normalises_half_width_katakana_with_voiced_marks_per_cluster():
    original = "ｶﾞｽ 090"
    normalized = normalize(original)

    assert normalized.text == "ガス 090"
    assert normalized.original_span(3, 6) == (4, 7)
    assert normalized.original_span(0, 1) == (0, 2)


def test_it_chooses_the_language_by_script():
    assert detect_language("call 090-1234-5678") == "en"
    assert detect_language("電話は090-1234-5678です") == "ja"
    assert detect_language("カタカナ") == "ja"
    assert detect_language("ひらがな") == "ja"
