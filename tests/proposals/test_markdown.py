"""Where an approved addition lands in AGENTS.md, and what a proposal may name."""

from datetime import date

import pytest

from memory_service.exceptions import ValidationError
from proposals.markdown import diff_lines, find_section, insert_addition, parse_section, validate_addition

DAY = date(2026, 3, 15)
SEED = """# AGENTS.md

## Boundaries

### Always
- Read existing patterns before introducing new ones

### Ask First
- Adding dependencies

### Never
- Commit secrets
"""


def test_it_inserts_under_a_level_three_section_marked_with_the_date():
    after = insert_addition(
        SEED, section=parse_section("### Always"), addition="Run `pnpm typecheck` after editing TS files", on=DAY
    )
    assert after == SEED.replace(
        "- Read existing patterns before introducing new ones\n",
        "- Read existing patterns before introducing new ones\n"
        "- 🤖 Added 2026-03-15: Run `pnpm typecheck` after editing TS files\n",
    )


def test_a_bare_title_matches_either_level_case_and_width_insensitively():
    after = insert_addition(SEED, section=parse_section("ｎｅｖｅｒ"), addition="- Force-push to main", on=DAY)
    assert after.endswith("- Commit secrets\n- 🤖 Added 2026-03-15: Force-push to main\n")


def test_a_level_two_section_takes_the_addition_before_its_first_sub_heading():
    after = insert_addition(SEED, section=parse_section("## Boundaries"), addition="Ask when unsure", on=DAY)
    assert "## Boundaries\n\n- 🤖 Added 2026-03-15: Ask when unsure\n\n### Always" in after


def test_a_missing_section_is_created_at_the_end_and_an_empty_document_gets_one():
    after = insert_addition(SEED, section=parse_section("### Testing"), addition="Run make test", on=DAY)
    assert after.endswith("- Commit secrets\n\n### Testing\n\n- 🤖 Added 2026-03-15: Run make test\n")
    assert insert_addition("", section=parse_section("Style"), addition="Use ruff", on=DAY) == (
        "## Style\n\n- 🤖 Added 2026-03-15: Use ruff\n"
    )


def test_headings_inside_code_fences_are_not_sections():
    text = "## Setup\n\n```sh\n## Never\necho hi\n```\n"
    assert find_section(text, parse_section("Never")) is None
    after = insert_addition(text, section=parse_section("Setup"), addition="Use make", on=DAY)
    assert after == "## Setup\n\n```sh\n## Never\necho hi\n```\n- 🤖 Added 2026-03-15: Use make\n"


def test_a_multi_line_addition_stays_one_list_item():
    after = insert_addition(
        "## Style\n", section=parse_section("Style"), addition="Prefer dataclasses\nover dicts", on=DAY
    )
    assert after == "## Style\n\n- 🤖 Added 2026-03-15: Prefer dataclasses\n  over dicts\n"


@pytest.mark.parametrize(
    ("section", "field"),
    [("", "section"), ("# Title", "section"), ("#### Deep", "section"), ("a\nb", "section"), ("x" * 201, "section")],
)
def test_it_refuses_sections_that_are_not_one_level_two_or_three_heading(section, field):
    with pytest.raises(ValidationError) as error:
        parse_section(section)
    assert field in error.value.fields


@pytest.mark.parametrize("addition", ["", "   ", "ok\n## Sneaky heading", "```\ncode\n```", "x" * 2001])
def test_it_refuses_additions_that_would_restructure_the_document(addition):
    with pytest.raises(ValidationError) as error:
        validate_addition(addition)
    assert "addition" in error.value.fields


def test_the_diff_marks_added_lines():
    before = "## Style\n- a\n"
    after = insert_addition(before, section=parse_section("Style"), addition="b", on=DAY)
    kinds = [(line.kind, line.text) for line in diff_lines(before, after)]
    assert ("add", "+- 🤖 Added 2026-03-15: b") in kinds
    assert not [k for k, _ in kinds if k == "remove"]
