// The browsing page's keyboard shortcuts, quoting from the selection, and the active-time heartbeat.
// No inline scripts (CSP); the panel is replaced by htmx after every action, so listeners live on document.
(function () {
  "use strict";

  var lastSelection = "";
  var lastInput = Date.now();
  var HEARTBEAT_MS = 15000;
  var IDLE_MS = 60000;

  function pageText() { return document.getElementById("page-text"); }

  // Remember the last selection made inside the page text: pressing a button must not lose it.
  document.addEventListener("selectionchange", function () {
    var selection = window.getSelection();
    var container = pageText();
    if (selection && container && selection.rangeCount && container.contains(selection.anchorNode)) {
      var text = selection.toString();
      if (text.trim()) { lastSelection = text; }
    }
  });

  // The Quote form sends the selected text as the quote.
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    if (form && form.id === "quote-form") {
      event.detail.parameters.text = lastSelection.trim();
    }
  });

  document.addEventListener("htmx:afterSwap", function () {
    lastSelection = "";
    var selection = window.getSelection();
    if (selection) { selection.removeAllRanges(); }
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

  // Active time: the server counts the gaps between these beats, while the page is visible and in use.
  window.setInterval(function () {
    var holder = document.getElementById("episode-panel") || document.getElementById("answer-step");
    if (!holder || document.visibilityState !== "visible" || Date.now() - lastInput > IDLE_MS) { return; }
    var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    window.fetch(holder.dataset.heartbeatUrl, { method: "POST", headers: headers, credentials: "same-origin" });
  }, HEARTBEAT_MS);
}());
