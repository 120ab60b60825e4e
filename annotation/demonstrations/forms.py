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


class ActionForm(forms.Form):
    kind = forms.ChoiceField(choices=[(kind, kind) for kind in KINDS])
    text = forms.CharField(required=False, max_length=2000, strip=False)
    key = forms.UUIDField()
    version = forms.IntegerField(min_value=0)

    def clean(self) -> dict:
        data = super().clean()
        kind, text = data.get("kind"), (data.get("text") or "")
        if kind is None:
            return data
        if kind == "command" and text not in FIXED_COMMANDS:
            raise forms.ValidationError("Unknown command.")
        if kind == "click" and not text.isdigit():
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


class AnswerForm(forms.Form):
    answer = forms.CharField(required=False, max_length=20_000, strip=False, widget=forms.Textarea)


class NoteForm(forms.Form):
    note = forms.CharField(required=False, max_length=5000)


class SkipForm(forms.Form):
    reason = forms.CharField(max_length=1000)
