// Feedback task pages: keyboard ratings, claim annotations, lease heartbeat. No inline scripts (CSP).
(function () {
  "use strict";

  // 1-5 choose an option on the focused scale; Tab moves between scales (radio groups are one stop each).
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var scale = event.target.closest && event.target.closest("[data-scale]");
    if (!scale || !/^[1-9]$/.test(event.key)) { return; }
    var radios = scale.querySelectorAll("input[type=radio]");
    var radio = radios[Number(event.key) - 1];
    if (!radio) { return; }
    event.preventDefault();
    radio.checked = true;
    radio.focus();
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  });

  // Claims: select a span of an answer, describe it, add it; listed, editable, removable, highlighted.
  var SUPPORT = {}, RELEVANCE = {};
  function labels() {
    document.querySelectorAll(".claim-editor select[data-field=support] option").forEach(function (o) { SUPPORT[o.value] = o.textContent; });
    document.querySelectorAll(".claim-editor select[data-field=relevance] option").forEach(function (o) { RELEVANCE[o.value] = o.textContent; });
  }

  function claimsInput(slot) { return document.querySelector("input[data-claims='" + slot + "']"); }
  function readClaims(slot) {
    try { var value = JSON.parse(claimsInput(slot).value || "[]"); return Array.isArray(value) ? value : []; }
    catch (e) { return []; }
  }
  function writeClaims(slot, claims) {
    var input = claimsInput(slot);
    input.value = JSON.stringify(claims);
    input.dispatchEvent(new Event("change", { bubbles: true }));
    render(slot);
  }

  function offsetIn(container, node, offset) {
    var range = document.createRange();
    range.setStart(container, 0);
    range.setEnd(node, offset);
    return range.toString().length;
  }

  function render(slot) {
    var box = document.querySelector(".answer-text[data-slot='" + slot + "']");
    var text = box.dataset.text;
    var claims = readClaims(slot);
    var marked = new Array(text.length + 1).fill(false);
    claims.forEach(function (c) { for (var i = c.start; i < c.end && i < text.length; i++) { marked[i] = true; } });
    box.textContent = "";
    var i = 0;
    while (i < text.length) {
      var j = i;
      while (j < text.length && marked[j] === marked[i]) { j++; }
      var piece = text.slice(i, j);
      if (marked[i]) { var mark = document.createElement("mark"); mark.textContent = piece; box.appendChild(mark); }
      else { box.appendChild(document.createTextNode(piece)); }
      i = j;
    }
    var list = document.querySelector("[data-claims-list='" + slot + "']");
    list.textContent = "";
    claims.forEach(function (claim, index) {
      var item = document.createElement("li");
      var quote = document.createElement("q");
      quote.textContent = text.slice(claim.start, claim.end);
      item.appendChild(quote);
      item.appendChild(document.createTextNode(" — " + (SUPPORT[claim.support] || claim.support) + ", " +
        (RELEVANCE[claim.relevance] || claim.relevance) +
        (claim.quotes && claim.quotes.length ? ", references " + claim.quotes.map(function (q) { return "[" + (q + 1) + "]"; }).join(" ") : "") + " "));
      var edit = document.createElement("button");
      edit.type = "button"; edit.className = "link"; edit.textContent = "Edit";
      edit.setAttribute("aria-label", "Edit claim " + (index + 1) + " of answer " + slot);
      edit.addEventListener("click", function () { openEditor(slot, claim.start, claim.end, index); });
      var remove = document.createElement("button");
      remove.type = "button"; remove.className = "link"; remove.textContent = "Remove";
      remove.setAttribute("aria-label", "Remove claim " + (index + 1) + " of answer " + slot);
      remove.addEventListener("click", function () {
        var all = readClaims(slot); all.splice(index, 1); writeClaims(slot, all);
      });
      item.appendChild(edit); item.appendChild(document.createTextNode(" ")); item.appendChild(remove);
      list.appendChild(item);
    });
  }

  // The claim on exactly this span (another than `except`), or -1: one span has one support level, so a
  // second claim on it is refused here as the server refuses it (restored drafts included).
  function claimOn(claims, start, end, except) {
    for (var i = 0; i < claims.length; i++) {
      if (i !== except && Number(claims[i].start) === start && Number(claims[i].end) === end) { return i; }
    }
    return -1;
  }

  function openEditor(slot, start, end, index) {
    var editor = document.querySelector(".claim-editor[data-slot='" + slot + "']");
    var text = document.querySelector(".answer-text[data-slot='" + slot + "']").dataset.text;
    if (index === undefined) {  // a span already claimed opens that claim to edit, not a second one
      var same = claimOn(readClaims(slot), start, end);
      if (same >= 0) { index = same; }
    }
    editor.hidden = false;
    editor.dataset.start = start; editor.dataset.end = end;
    editor.dataset.index = index === undefined ? "" : String(index);
    var existing = index === undefined ? null : readClaims(slot)[index];
    editor.querySelector(".claim-span").textContent = "“" + text.slice(start, end) + "”" +
      (existing ? " (claim " + (index + 1) + ")" : "");
    // A new claim starts with no support level: a preselected one would bias quick claims.
    editor.querySelector("[data-field=support]").value = existing ? existing.support : "";
    showClaimError(editor, "");
    editor.querySelector("[data-field=relevance]").value = existing ? existing.relevance : "relevant";
    editor.querySelectorAll("[data-quote]").forEach(function (box) {
      box.checked = existing ? existing.quotes.indexOf(Number(box.dataset.quote)) >= 0 : false;
    });
    editor.querySelector("[data-action=add-claim]").textContent = existing ? "Save claim" : "Add claim";
  }

  // The message sits next to the support select in a role=alert region, so screen readers announce it.
  function showClaimError(editor, message) {
    var select = editor.querySelector("[data-field=support]");
    editor.querySelector("[data-claim-error]").textContent = message;
    if (message) { select.setAttribute("aria-invalid", "true"); } else { select.removeAttribute("aria-invalid"); }
  }

  document.addEventListener("change", function (event) {
    var select = event.target.closest && event.target.closest(".claim-editor [data-field=support]");
    if (select && select.value) { showClaimError(select.closest(".claim-editor"), ""); }
  });

  // A span selected with the mouse, or with the keyboard (Shift+arrows in caret browsing, F7), opens the editor.
  function spanSelected(event) {
    // Clicks in the editor (its selects, checkboxes, button) leave the selection in place: not a new span.
    if (event.target.closest && event.target.closest(".claim-editor")) { return; }
    var selection = window.getSelection();
    if (!selection || selection.isCollapsed || !selection.rangeCount) { return; }
    var range = selection.getRangeAt(0);
    var box = range.commonAncestorContainer.nodeType === 1 ? range.commonAncestorContainer.closest(".answer-text")
      : range.commonAncestorContainer.parentElement.closest(".answer-text");
    if (!box) { return; }
    var start = offsetIn(box, range.startContainer, range.startOffset);
    var end = offsetIn(box, range.endContainer, range.endOffset);
    var editor = document.querySelector(".claim-editor[data-slot='" + box.dataset.slot + "']");
    if (!editor) { return; }  // templates without claims (minimal comparison, ranking, rating)
    // A click elsewhere while the span is still selected must not reset what the editor holds.
    if (!editor.hidden && editor.dataset.start === String(start) && editor.dataset.end === String(end)) { return; }
    if (end > start) { openEditor(box.dataset.slot, start, end); }
  }
  document.addEventListener("mouseup", spanSelected);
  document.addEventListener("keyup", spanSelected);

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-action=add-claim]");
    if (!button) { return; }
    var editor = button.closest(".claim-editor");
    var slot = editor.dataset.slot;
    var support = editor.querySelector("[data-field=support]");
    if (!support.value) {
      showClaimError(editor, "Choose how well this claim is supported before adding it.");
      support.focus();
      return;
    }
    var claim = {
      start: Number(editor.dataset.start), end: Number(editor.dataset.end),
      support: support.value,
      relevance: editor.querySelector("[data-field=relevance]").value,
      quotes: Array.prototype.map.call(editor.querySelectorAll("[data-quote]:checked"), function (b) { return Number(b.dataset.quote); })
    };
    var claims = readClaims(slot);
    var index = editor.dataset.index ? Number(editor.dataset.index) : -1;
    var same = claimOn(claims, claim.start, claim.end, index);
    if (same >= 0) {
      showClaimError(editor, "This span is already claim " + (same + 1) + ": edit that one instead.");
      return;
    }
    if (index >= 0) { claims[index] = claim; } else { claims.push(claim); }
    editor.hidden = true;
    window.getSelection().removeAllRanges();
    writeClaims(slot, claims);
  });

  // Free-text fields with a word minimum count the words as they are typed, as the server counts them.
  function countWords(box) {
    var field = document.getElementById(box.dataset.wordCount);
    var min = Number(box.dataset.minWords);
    var words = field.value.trim() ? field.value.trim().split(/\s+/).length : 0;
    box.textContent = words === 0 ? "At least " + min + " words." :
      words + (words === 1 ? " word" : " words") + (words < min ? " so far: at least " + min + "." : ".");
  }
  document.addEventListener("input", function (event) {
    var id = event.target.id;
    var box = id && document.querySelector("[data-word-count='" + id + "']");
    if (box) { countWords(box); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    labels();
    document.querySelectorAll("[data-word-count]").forEach(countWords);
    document.querySelectorAll(".answer-text[data-slot]").forEach(function (box) {
      if (claimsInput(box.dataset.slot)) { render(box.dataset.slot); }
    });
  });

  // A refused draft (the task changed in another tab, or it is closed) says why where "saved" would show:
  // htmx swaps no 4xx response by itself. The text is the server's plain-text message.
  document.addEventListener("htmx:responseError", function (event) {
    var status = document.getElementById("draft-status");
    if (status && event.detail.target === status) { status.textContent = event.detail.xhr.responseText; }
  });

  // Keep the lease while the page is open and in use; the page view it was served with makes the beat count
  // as active time (a beat without it is refused).
  var lastInput = Date.now();
  ["keydown", "mousemove", "mousedown", "wheel", "touchstart", "input"].forEach(function (name) {
    document.addEventListener(name, function () { lastInput = Date.now(); }, { passive: true });
  });
  window.setInterval(function () {
    var task = document.getElementById("task");
    if (!task || document.visibilityState !== "visible" || Date.now() - lastInput > 60000) { return; }
    var headers = JSON.parse(document.body.getAttribute("hx-headers") || "{}");
    var body = new URLSearchParams({ page_view: task.dataset.pageView || "" });
    window.fetch(task.dataset.heartbeatUrl, { method: "POST", headers: headers, body: body, credentials: "same-origin" });
  }, 15000);
}());
