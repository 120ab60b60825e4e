import pytest

from browser.engine.commands import Command, InvalidCommand, Kind, parse_command


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Search how do bees make honey", Command(Kind.SEARCH, "how do bees make honey")),
        ("Clicked on link 12", Command(Kind.CLICK, "12")),
        ("Find in page: honey", Command(Kind.FIND, "honey")),
        ("Quote: bees make honey━from nectar", Command(Kind.QUOTE, "bees make honey━from nectar")),
        ("Scrolled down 3", Command(Kind.SCROLL_DOWN, "3")),
        ("Scrolled up 1", Command(Kind.SCROLL_UP, "1")),
        ("Top", Command(Kind.TOP)),
        ("Back", Command(Kind.BACK)),
        ("End: Answer", Command(Kind.END, "Answer")),
        ("End: Nonsense", Command(Kind.END, "Nonsense")),
        ("End: Controversial\n", Command(Kind.END, "Controversial")),
    ],
)
def test_every_command_of_table_1_parses(text, expected):
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "search bees",
        "Search ",
        "Click on link 1",
        "Clicked on link one",
        "Clicked on link -1",
        "Scrolled down 4",
        "Scrolled down 0",
        "Scrolled  down 1",
        "Scroll down",
        "End: answer",
        "End",
        "Quote:",
        "Find in page:",
        "top",
        "Back please",
    ],
)
def test_anything_else_is_an_invalid_command_that_lists_the_valid_forms(text):
    with pytest.raises(InvalidCommand, match="Valid actions: Search <query>; Clicked on link <id>"):
        parse_command(text)
