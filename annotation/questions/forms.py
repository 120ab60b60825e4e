from django import forms
from django.db.models import QuerySet

from annotation.models import Question, Split
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
    """The question list's filters, for the page and the API: bad values (NUL, too long, an unknown split)
    are errors, never a 500."""

    q = forms.CharField(required=False, max_length=200, label="Text contains")
    dataset = forms.CharField(required=False, max_length=100)
    split = forms.ChoiceField(required=False, choices=[("", "Any split"), *Split.choices])

    def filter(self, questions: QuerySet[Question]) -> QuerySet[Question]:
        """``questions`` narrowed by the valid filters."""
        data = self.cleaned_data
        if data["q"]:
            questions = questions.filter(text__icontains=data["q"])
        if data["dataset"]:
            questions = questions.filter(dataset=data["dataset"])
        if data["split"]:
            questions = questions.filter(split=data["split"])
        return questions
