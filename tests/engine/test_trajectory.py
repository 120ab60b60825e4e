from browser.engine.trajectory import merge_scrolls, model_commands


def test_consecutive_single_scrolls_merge_up_to_three():
    commands = ["Search x", *["Scrolled down 1"] * 5, "Scrolled up 1", "Scrolled up 1", "Quote: y"]
    assert merge_scrolls(commands) == [
        "Search x",
        "Scrolled down 3",
        "Scrolled down 2",
        "Scrolled up 2",
        "Quote: y",
    ]


def test_scrolls_in_different_directions_or_apart_do_not_merge():
    commands = [
        "Scrolled down 1",
        "Scrolled up 1",
        "Scrolled down 1",
        "Top",
        "Scrolled down 1",
        "Scrolled down 2",
    ]
    assert merge_scrolls(commands) == commands


def test_merging_is_pure_and_keeps_other_commands_verbatim():
    commands = ["Search a", "Find in page: b", "Back"]
    assert merge_scrolls(commands) == commands
    assert merge_scrolls([]) == []


def test_the_models_commands_are_the_valid_ones_less_removed_quotes_with_scrolls_merged():
    actions = [
        ("Search x", True),
        ("Quote: a", True),
        ("Scrolled down 1", True),
        ("Clicked on link 99", False),
        ("Scrolled down 1", True),
        ("Quote: b", True),
    ]
    assert model_commands(actions) == ["Search x", "Quote: a", "Scrolled down 2", "Quote: b"]
    assert model_commands(actions, removed={1}) == ["Search x", "Scrolled down 2", "Quote: b"]
