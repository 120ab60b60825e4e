"""The demonstrator's pages: landing, the browsing episode (htmx), the answer step, history."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from annotation.demonstrations import service
from annotation.demonstrations.forms import (
    ActionForm,
    AnswerForm,
    NoteForm,
    RemoveQuoteForm,
    SkipForm,
    SnapshotForm,
    form_problems,
)
from annotation.demonstrations.presenter import active_time, panel_context
from annotation.demonstrations.trajectory import trajectory
from annotation.models import ActiveKind, Episode, EpisodeStatus
from annotation.workforce import activity
from annotation.workforce.gate import demonstration_notice
from annotation.workforce.reviews import review_context
from browser.services import load_snapshot
from browser.sources import describe_source
from core.permissions import Role, get_visible_or_404, role_required


@require_GET
@role_required(Role.DEMONSTRATOR)
def landing(request: HttpRequest) -> HttpResponse:
    episodes = Episode.objects.filter(user=request.user).select_related("question")
    return render(
        request,
        "demonstrations/landing.html",
        {
            "open_episode": episodes.open().first(),
            "recent": episodes.exclude(status__in=(EpisodeStatus.BROWSING, EpisodeStatus.ANSWERING))[:5],
            "waiting": service.open_question_count(),
            "gate": demonstration_notice(request.user),
        },
    )


@require_POST
@role_required(Role.DEMONSTRATOR)
def start(request: HttpRequest) -> HttpResponse:
    episode = service.next_episode(request.user)
    if episode is None:
        messages.info(request, "No questions are waiting for you right now. Thank you!")
        return redirect("annotation:next_question")
    return redirect("annotation:episode", pk=episode.pk)


@require_GET
@login_required
def episode_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The episode as its current step: browsing, answering, or (finished, or someone else's) read-only."""
    episodes = Episode.objects.select_related("question", "user", "sample__run")
    episode = get_visible_or_404(episodes, request.user, pk=pk)
    refused: dict = {}
    if episode.user_id == request.user.pk:
        # What the last refused answer left for this page (POST-redirect-GET: a reload never re-posts).
        refused = request.session.pop(_refused_key(episode.pk), None) or {}
    if episode.user_id != request.user.pk or not episode.is_open:
        return _detail(request, episode, refused)
    browser = service.open_browser(episode)
    if episode.status == EpisodeStatus.ANSWERING:
        return render(request, "demonstrations/answer.html", _answer_context(episode, browser, refused))
    context = {
        **panel_context(episode, browser),
        "refused": refused,
        "corpus": describe_source(episode.search, episode.corpus),
    }
    return render(request, "demonstrations/episode.html", context)


def _refused_key(pk: int) -> str:
    return f"episode-{pk}-answer-refused"


def _detail(request: HttpRequest, episode: Episode, refused: dict) -> HttpResponse:
    """The read-only page: the facts, the answer and its quotes, and the trajectory replayed step by step."""
    browser = service.open_browser(episode)
    answer_prompt, answering = browser.answer_prompt(), episode.status == EpisodeStatus.ANSWERING
    context = {
        "episode": episode,
        "quotes": browser.quotes,
        "steps": trajectory(episode, browser),
        # What the answer is written from (a model's prompt), once browsing led to the answer step.
        "answer_prompt": answer_prompt if episode.answer or answering else "",
        "note_form": NoteForm(),
    }
    # A model's sample has no demonstrator: the page names its policy and links back to its run.
    context["sample"] = getattr(episode, "sample", None)
    context.update(review_context(episode, request.user))  # researchers' grades and comments
    return render(request, "demonstrations/detail.html", {**context, "refused": refused})


def _answer_context(episode: Episode, browser, refused: dict) -> dict:
    """The answer step: the refused text when the last submit was refused, else the autosaved draft."""
    text = refused.get("text", episode.answer_draft)
    return {
        "episode": episode,
        "question": browser.question,
        "quotes": browser.quotes,
        "form": AnswerForm(initial={"answer": text}),
        "errors": refused.get("errors", []),
        "can_browse_again": browser.actions_left > 0,
        "actions_left": browser.actions_left,
        "active_seconds": int(episode.active_seconds),
        "active_time": active_time(episode.active_seconds),
        # The quotes' remove buttons send these, as the browsing panel's forms do.
        "key": uuid.uuid4(),
        "version": episode.version,
    }


def _own_episode(request: HttpRequest, pk: int, *, full: bool = False) -> Episode:
    """Only the demonstrator acts on an episode; for anyone else it does not exist (404).

    Loads only the key columns unless ``full``: the services lock and read the row themselves."""
    episodes = Episode.objects.all() if full else Episode.objects.only("pk", "user_id", "version")
    return get_object_or_404(episodes, pk=pk, user=request.user)


@require_POST
@role_required(Role.DEMONSTRATOR)
@vary_on_headers("HX-Request")
def act(request: HttpRequest, pk: int) -> HttpResponse:
    form = ActionForm(request.POST)
    if not form.is_valid():
        message = " ".join(form.non_field_errors()) or "That request was incomplete; nothing was done."
        return _panel_or_redirect(request, _own_episode(request, pk, full=True), message=message, valid=False)
    try:
        outcome = service.record_action(
            pk, request.user, form.command(), form.cleaned_data["key"], form.cleaned_data["version"]
        )
    except Episode.DoesNotExist:
        raise Http404("No such episode.") from None
    episode = outcome.episode
    if episode.status != EpisodeStatus.BROWSING:
        return _go(request, reverse("annotation:episode", args=[episode.pk]))
    return _panel_or_redirect(request, episode, outcome.browser, *_said(outcome))


def _said(outcome: service.Outcome) -> tuple[str, bool]:
    """What the page says about a change, and whether it was valid. Not applied: a repeated key (nothing
    to say) or a stale version (the notice says so: not the person's mistake, so a note, not an error)."""
    if outcome.result is not None:
        return outcome.result.message, outcome.result.valid
    return outcome.notice, True


@require_POST
@role_required(Role.DEMONSTRATOR)
@vary_on_headers("HX-Request")
def remove_quote(request: HttpRequest, pk: int) -> HttpResponse:
    """Take a quote off the list: from the browsing panel (htmx) or the answer step (a plain form)."""
    form = RemoveQuoteForm(request.POST)
    if not form.is_valid():
        message = "That request was incomplete; nothing was done."
        return _panel_or_redirect(request, _own_episode(request, pk, full=True), message=message, valid=False)
    data = form.cleaned_data
    try:
        outcome = service.remove_quote(pk, request.user, data["number"], data["key"], data["version"])
    except Episode.DoesNotExist:
        raise Http404("No such episode.") from None
    episode, (message, valid) = outcome.episode, _said(outcome)
    if episode.status == EpisodeStatus.BROWSING:
        return _panel_or_redirect(request, episode, outcome.browser, message, valid)
    # The answer step (or a closed episode) is a whole page: back to it, with the news.
    if message:
        (messages.success if valid else messages.error)(request, message)
    return _go(request, reverse("annotation:episode", args=[episode.pk]))


def _panel_or_redirect(request, episode, browser=None, message="", valid=True) -> HttpResponse:
    if not request.htmx:
        if message:
            (messages.info if valid else messages.error)(request, message)
        return redirect("annotation:episode", pk=episode.pk)
    browser = browser or service.open_browser(episode)
    context = panel_context(episode, browser, message=message, valid=valid)
    return render(request, "demonstrations/_panel.html", context)


def _go(request: HttpRequest, url: str) -> HttpResponse:
    """A full-page navigation, also from an htmx request."""
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


@require_POST
@role_required(Role.DEMONSTRATOR)
def heartbeat(request: HttpRequest, pk: int) -> HttpResponse:
    episode = _own_episode(request, pk)
    served = activity.served_at(
        request.POST.get("page_view"), request.user, ActiveKind.DEMONSTRATION, episode.pk
    )
    if served is None:  # no page of this episode was served to this person: nothing is counted
        return HttpResponse(activity.NO_PAGE_VIEW, status=400)
    if service.heartbeat(episode.pk, request.user):
        activity.record(request.user, ActiveKind.DEMONSTRATION, served)
    return HttpResponse(status=204)


@require_POST
@role_required(Role.DEMONSTRATOR)
def draft(request: HttpRequest, pk: int) -> HttpResponse:
    episode = _own_episode(request, pk)
    form = AnswerForm(request.POST)
    if not form.is_valid():
        return HttpResponse(" ".join(form_problems(form)), status=400)
    try:
        service.save_draft(episode.pk, request.user, form.cleaned_data["answer"])
    except service.EpisodeClosed as exc:
        return HttpResponse(str(exc), status=409)
    return render(request, "demonstrations/_draft_saved.html")


@require_POST
@role_required(Role.DEMONSTRATOR)
def answer(request: HttpRequest, pk: int) -> HttpResponse:
    episode = _own_episode(request, pk)
    form = AnswerForm(request.POST)
    if form.is_valid():
        errors = service.submit_answer(episode.pk, request.user, form.cleaned_data["answer"])
    else:
        errors = form_problems(form)
    if not errors:
        messages.success(request, "Answer submitted. Thank you!")
        return redirect("annotation:next_question")
    # POST-redirect-GET: the episode page shows the errors and the text sent once, whatever step the
    # episode is at now (another tab may have finished it); a reload never re-posts over a newer draft.
    request.session[_refused_key(episode.pk)] = {"errors": errors, "text": request.POST.get("answer", "")}
    return redirect("annotation:episode", pk=episode.pk)


@require_POST
@role_required(Role.DEMONSTRATOR)
def browse_again(request: HttpRequest, pk: int) -> HttpResponse:
    problem = service.return_to_browsing(_own_episode(request, pk).pk, request.user)
    if problem:
        messages.error(request, problem)
    return redirect("annotation:episode", pk=pk)


@require_POST
@role_required(Role.DEMONSTRATOR)
def note(request: HttpRequest, pk: int) -> HttpResponse:
    episode = _own_episode(request, pk)
    form = NoteForm(request.POST)
    if form.is_valid():
        try:
            service.save_note(episode.pk, request.user, form.cleaned_data["note"])
            messages.success(request, "Note saved.")
        except service.EpisodeClosed as exc:
            messages.error(request, str(exc))
    else:
        messages.error(request, " ".join(form_problems(form)))
    return redirect("annotation:episode", pk=pk)


@require_POST
@role_required(Role.DEMONSTRATOR)
def skip(request: HttpRequest, pk: int) -> HttpResponse:
    episode = _own_episode(request, pk)
    form = SkipForm(request.POST)
    try:
        if not form.is_valid():
            raise service.EpisodeClosed(" ".join(form_problems(form)))
        service.skip_episode(episode.pk, request.user, form.cleaned_data["reason"])
    except service.EpisodeClosed as exc:
        messages.error(request, str(exc))
        return redirect("annotation:episode", pk=pk)
    messages.info(request, "Question skipped.")
    return redirect("annotation:next_question")


@require_GET
@login_required
def page_snapshot(request: HttpRequest, pk: int) -> HttpResponse:
    """A page an episode showed, whole and as the environment rendered it (the trajectory's "page before"
    and "page after" links). Whoever may read the episode may read its pages; a page it never showed does
    not exist here (404)."""
    episode = get_visible_or_404(Episode.objects.select_related("question"), request.user, pk=pk)
    form = SnapshotForm(request.GET)
    if not form.is_valid():
        return HttpResponse(" ".join(form_problems(form)), status=400, content_type="text/plain")
    digest = form.cleaned_data["digest"]
    if digest not in episode.state["pages"]:
        raise Http404("This episode showed no such page.")
    context = {"episode": episode, "page": load_snapshot(digest), "digest": digest}
    return render(request, "demonstrations/snapshot.html", {**context, "step": form.cleaned_data["step"]})


@require_GET
@role_required(Role.DEMONSTRATOR)
def history(request: HttpRequest) -> HttpResponse:
    episodes = Episode.objects.filter(user=request.user).select_related("question")
    return render(request, "demonstrations/history.html", {"episodes": episodes})


@require_GET
@login_required
def instructions(request: HttpRequest) -> HttpResponse:
    return render(request, "demonstrations/instructions.html")
