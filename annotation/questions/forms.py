from django import forms

from annotation.models import Split
from annotation.questions.formats import FORMATS


class QuestionImportForm(forms.Form):
    file = forms.FileField(label="Question file", help_text="TruthfulQA CSV, TriviaQA, WebGLM or plain JSONL")
    dataset = forms.SlugField(
        required=False, max_length=100, help_text="Leave empty to take it from the format or the file name."
    )
    file_format = forms.ChoiceField(
        label="Format", required=False, choices=[("", "Detect"), *[(f, f) for f in FORMATS]]
    )
    explain_statements = forms.BooleanField(
        required=False,
        label='Prefix statements with "Explain: "',
        help_text="Default: only for dataset eli5.",
    )


class QuestionFilterForm(forms.Form):
    """The question list's filters; bad values are shown as errors, never a 500."""

    q = forms.CharField(required=False, max_length=200, label="Text contains")
    dataset = forms.CharField(required=False, max_length=100)
    split = forms.ChoiceField(required=False, choices=[("", "Any split"), *Split.choices])
