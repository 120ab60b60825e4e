// The browsing page's keyboard shortcuts, quoting from the selection, the confirmation before ending without
// an answer, the live region read out after each action, and active time (the heartbeat and the clock).
// No inline scripts (CSP); the panel is replaced by htmx after every action, so listeners live on document.
(function () {
  "use strict";

  var lastSelection = "";
  var lastInput = Date.now();
  var HEARTBEAT_MS = 15000;
  var IDLE_MS = 60000;

  function pageText() { return document.getElementById("page-text"); }

  // The selected text, when the selection starts in the page text; "" otherwise.
  function selectedPageText() {
    var selection = window.getSelection();
    var container = pageText();
    if (selection && container && selection.rangeCount && container.contains(selection.anchorNode)) {
      return selection.toString().trim();
    }
    return "";
  }

  // Remember the last selection made inside the page text: pressing a button must not lose it.
  document.addEventListener("selectionchange", function () {
    lastSelection = selectedPageText() || lastSelection;
  });

  // The Quote form sends what is selected when Quote is pressed. selectionchange is queued after the
  // selection changes, so a Quote pressed before it arrives would send the selection before this one (a
  // word double-clicked first, such as the Find highlight, instead of the sentence selected from it); the
  // remembered selection is for a press that cleared the selection.
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (form && form.id === "quote-form") {
      event.detail.parameters.text = selectedPageText() || lastSelection;
    }
  });

  // The live region stays in the page (the panel is replaced) and says what the action changed; the panel
  // carries the sentence (data-announce). Emptied first, so that the same sentence twice is read twice.
  var ANNOUNCE_DELAY_MS = 100;

  function announceChange() {
    var panel = document.getElementById("episode-panel");
    var live = document.getElementById("live-status");
    if (!panel || !live) { return; }
    live.textContent = "";
    window.setTimeout(function () { live.textContent = panel.dataset.announce || ""; }, ANNOUNCE_DELAY_MS);
  }

  document.addEventListener("htmx:afterSwap", function () {
    lastSelection = "";
    var selection = window.getSelection();
    if (selection) { selection.removeAllRanges(); }
    announceChange();
  });

  // End: Nonsense and End: Controversial end the question without an answer, so the first press only arms
  // the button ("Confirm: ..." with a Cancel beside it) and the second sends. The listener runs in the
  // capture phase on document, before htmx's submit listener on the form: an unconfirmed press never
  // reaches the server. Shortcuts and Enter submit the same forms, so they go through this too.
  var CONFIRM_PREFIX = "Confirm: ";
  // A second press sooner than this is the same slip (a double click), not a confirmation.
  var CONFIRM_DELAY_MS = 600;

  function confirmStatus() { return document.getElementById("end-confirm-status"); }

  function announce(text) {
    var status = confirmStatus();
    if (status) { status.textContent = text; }
  }

  function needsConfirmation(button) {
    var group = button && button.closest && button.closest("[data-confirm-ids]");
    return Boolean(group) && group.dataset.confirmIds.split(/\s+/).indexOf(button.id) >= 0;
  }

  function disarm(button) {
    if (!button.dataset.armed) { return; }
    delete button.dataset.armed;
    button.removeAttribute("aria-disabled");
    button.textContent = button.dataset.label;
    var cancel = document.getElementById(button.id + "-cancel");
    if (cancel) { cancel.remove(); }
  }

  function armedButton() { return document.querySelector("button[data-armed]"); }

  function cancelConfirmation(button) {
    disarm(button);
    button.focus();
    announce("Cancelled: " + button.textContent + " was not sent; the question goes on.");
  }

  function arm(button) {
    var other = armedButton();
    if (other) { disarm(other); }
    button.dataset.label = button.textContent;
    button.dataset.armed = "true";
    button.textContent = CONFIRM_PREFIX + button.dataset.label;
    button.setAttribute("aria-disabled", "true");
    window.setTimeout(function () { button.removeAttribute("aria-disabled"); }, CONFIRM_DELAY_MS);
    var cancel = document.createElement("button");
    cancel.type = "button";
    cancel.id = button.id + "-cancel";
    cancel.className = "secondary";
    cancel.dataset.cancels = button.id;
    cancel.textContent = "Cancel";
    button.insertAdjacentElement("afterend", cancel);
    button.focus();
    announce("Press \u201c" + button.textContent + "\u201d to end this question without an answer, " +
             "or Cancel (Escape) to go on.");
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter || (form.querySelector && form.querySelector("button[type=submit]"));
    if (!needsConfirmation(button)) { return; }
    if (button.dataset.armed && button.getAttribute("aria-disabled") !== "true") { return; }
    event.preventDefault();
    event.stopPropagation();
    if (!button.dataset.armed) { arm(button); }
  }, true);

  document.addEventListener("click", function (event) {
    var cancel = event.target.closest && event.target.closest("button[data-cancels]");
    var button = cancel && document.getElementById(cancel.dataset.cancels);
    if (button) { cancelConfirmation(button); }
  });

  function press(id, event) {
    var element = document.getElementById(id);
    if (element) { event.preventDefault(); element.click(); }
  }

  function focus(id, event) {
    var element = document.getElementById(id);
    if (element) { event.preventDefault(); element.focus(); element.select(); }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var armed = armedButton();
    if (event.key === "Escape" && armed) { event.preventDefault(); cancelConfirmation(armed); return; }
    var target = event.target;
    if (target.closest && target.closest("input, textarea, select, [contenteditable]")) {
      if (event.key === "Escape") { target.blur(); }
      return;
    }
    switch (event.key) {
      case "/": focus("search-query", event); break;
      case "f": focus("find-text", event); break;
      case "j": case "PageDown": press("scroll-down", event); break;
      case "k": case "PageUp": press("scroll-up", event); break;
      case "t": press("top-button", event); break;
      case "b": press("back-button", event); break;
      case "q": press("quote-button", event); break;
      default: break;
    }
  });

  // A refused draft (the episode left the answer step in another tab, or the text is refused) says why
  // where "saved" would show: htmx swaps no 4xx response by itself. The text is the server's plain text.
  document.addEventListener("htmx:responseError", function (event) {
    var status = document.getElementById("draft-status");
    if (status && event.detail.target === status) { status.textContent = event.detail.xhr.responseText; }
  });

  ["keydown", "mousemove", "mousedown", "wheel", "touchstart", "input"].forEach(function (name) {
    document.addEventListener(name, function () { lastInput = Date.now(); }, { passive: true });
  });

  function inUse() { return document.visibilityState === "visible" && Date.now() - lastInput <= IDLE_MS; }

  // The clock starts from the server's count (each new panel brings it) and ticks while the page is in
  // use, by the same rule as the heartbeat below, so what it shows is what the server will have counted.
  function clockText(total) {
    var hours = Math.floor(total / 3600);
    var minutes = Math.floor(total / 60) % 60;
    var seconds = String(total % 60).padStart(2, "0");
    return hours ? hours + ":" + String(minutes).padStart(2, "0") + ":" + seconds : minutes + ":" + seconds;
  }

  window.setInterval(function () {
    var clock = document.getElementById("active-time");
    if (!clock || !inUse()) { return; }
    var total = Number(clock.dataset.seconds) + 1;
    clock.dataset.seconds = String(total);
    clock.textContent = clockText(total);
  }, 1000);

  // Active time: the server counts the gaps between these beats, while the page is visible and in use; each
  // carries the page view the panel was served with (a beat without one is refused).
  window.setInterval(function () {
    var holder = document.getElementById("episode-panel") || document.getElementById("answer-step");
    if (!holder || !inUse()) { return; }
    var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    var body = new URLSearchParams({ page_view: holder.dataset.pageView || "" });
    window.fetch(holder.dataset.heartbeatUrl, { method: "POST", headers: headers, body: body, credentials: "same-origin" });
  }, HEARTBEAT_MS);
}());
