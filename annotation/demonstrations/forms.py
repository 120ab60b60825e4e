"""What the browsing page posts. The server builds the command text, so the page cannot send anything
the engine would not accept in form (the engine still judges the content: a quote not on the page...)."""

from __future__ import annotations

from django import forms

FIXED_COMMANDS = (
    "Top",
    "Back",
    "Scrolled down 1",
    "Scrolled up 1",
    "End: Answer",
    "End: Nonsense",
    "End: Controversial",
)
KINDS = ("search", "find", "quote", "click", "command")


class EpisodeChangeForm(forms.Form):
    """What every change from the browsing page sends: the idempotency key and the version it saw."""

    key = forms.UUIDField()
    version = forms.IntegerField(min_value=0)


class ActionForm(EpisodeChangeForm):
    kind = forms.ChoiceField(choices=[(kind, kind) for kind in KINDS])
    text = forms.CharField(required=False, max_length=2000, strip=False)

    def clean(self) -> dict:
        data = super().clean()
        kind, text = data.get("kind"), (data.get("text") or "")
        if kind is None:
            return data
        if kind == "command" and text not in FIXED_COMMANDS:
            raise forms.ValidationError("Unknown command.")
        if kind == "click" and not (text.isascii() and text.isdigit() and len(text) <= 6):
            raise forms.ValidationError("Unknown link.")
        if kind in {"search", "find"} and not text.strip():
            raise forms.ValidationError(
                "Type what to search for." if kind == "search" else "Type the text to find."
            )
        if kind == "quote" and not text.strip():
            raise forms.ValidationError("Select text in the page first, then press Quote.")
        return data

    def command(self) -> str:
        kind, text = self.cleaned_data["kind"], self.cleaned_data["text"]
        prefix = {
            "search": "Search ",
            "find": "Find in page: ",
            "quote": "Quote: ",
            "click": "Clicked on link ",
        }
        return text if kind == "command" else prefix[kind] + " ".join(text.split())


class RemoveQuoteForm(EpisodeChangeForm):
    number = forms.IntegerField(min_value=1, max_value=10_000)  # as the page numbers the quotes, from 1


class SnapshotForm(forms.Form):
    """Which page of an episode to show (its snapshot digest), and the step that links to it."""

    digest = forms.RegexField(regex=r"^[0-9a-f]{64}$", error_messages={"invalid": "Unknown page."})
    step = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)


def _messages(what: str, limit: int) -> dict[str, str]:
    """Errors that say what is wrong: Django's generic "Null characters are not allowed." and the bare
    length message left demonstrators guessing (a NUL used to be reported as "too long")."""
    return {
        "null_characters_not_allowed": f"{what} may not contain NUL characters (U+0000): remove them.",
        "max_length": f"{what} is too long: at most {limit} characters.",
        "required": f"Write {what.lower()}.",
    }


def form_problems(form: forms.Form) -> list[str]:
    """Every error of a bound form, as plain sentences for a message or a 400 body."""
    return [str(message) for messages in form.errors.values() for message in messages]


class AnswerForm(forms.Form):
    answer = forms.CharField(
        required=False,
        max_length=20_000,
        strip=False,
        widget=forms.Textarea,
        error_messages=_messages("The answer", 20_000),
    )


class NoteForm(forms.Form):
    note = forms.CharField(required=False, max_length=5000, error_messages=_messages("The note", 5000))


class SkipForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        error_messages=_messages("The reason", 1000) | {"required": "Say why you skip this question."},
    )
