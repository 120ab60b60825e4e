// K-way ranking page: the cards are kept in rank order (1 at the top; ties by answer number; the unranked
// last), the order the server renders from the draft, so a reload shows the same order. A rank selector
// sets one answer's rank (ties allowed); moving a card (drag, Alt+Up/Alt+Down, Move up/Move down) numbers
// every answer by its place in the list. Each change goes through the form's change event, which saves the
// draft. No inline scripts or styles (CSP): looks are classes in site.css.
(function () {
  "use strict";

  var EDGE = 80;  // px from the top or bottom of the window where a drag scrolls the page
  var list, status, readOnly;

  function items() { return Array.prototype.slice.call(list.querySelectorAll(".rank-item")); }
  function select(item) { return item.querySelector("select[name^=rank-]"); }
  function rankOf(item) { var value = select(item).value; return value ? Number(value) : items().length + 1; }

  function announce(message) {
    // Emptied first so that the same words twice in a row are announced twice.
    status.textContent = "";
    window.setTimeout(function () { status.textContent = message; }, 50);
  }

  // On the form itself, not on a select: the form's change saves the draft, and the select listener below
  // does not take it for a chosen rank.
  function saved() { list.closest("form").dispatchEvent(new Event("change", { bubbles: true })); }

  // Moving a node out of the document blurs it: whatever had the focus gets it back.
  function keepingFocus(change) {
    var focused = document.activeElement;
    change();
    if (focused && focused !== document.activeElement && list.contains(focused)) { focused.focus(); }
  }

  // After a move: every answer's rank is its place in the list.
  function numberInOrder(item) {
    var all = items();
    all.forEach(function (each, index) { select(each).value = String(index + 1); });
    announce("Answer " + item.dataset.slot + " moved to rank " + (all.indexOf(item) + 1) + " of " + all.length);
    saved();
  }

  function move(item, step) {
    if (readOnly) { return; }
    var all = items();
    var index = all.indexOf(item), to = index + step;
    if (to < 0 || to >= all.length) {
      announce("Answer " + item.dataset.slot + " is already " + (step < 0 ? "first" : "last") + ", rank " + (index + 1) + " of " + all.length);
      return;
    }
    keepingFocus(function () { list.insertBefore(item, step < 0 ? all[to] : all[to].nextSibling); });
    item.scrollIntoView({ block: "nearest" });
    numberInOrder(item);
  }

  // After a rank is chosen: the cards sorted by rank, as the server orders them.
  function sortByRank() {
    keepingFocus(function () {
      items().map(function (item) { return { item: item, rank: rankOf(item), slot: Number(item.dataset.slot) }; })
        .sort(function (a, b) { return a.rank - b.rank || a.slot - b.slot; })
        .forEach(function (entry) { list.appendChild(entry.item); });
    });
  }

  document.addEventListener("change", function (event) {
    var changed = event.target.closest && event.target.closest(".rank-item select[name^=rank-]");
    if (!changed) { return; }
    var item = changed.closest(".rank-item");
    sortByRank();
    announce(changed.value ? "Answer " + item.dataset.slot + " moved to rank " + changed.value + " of " + items().length
      : "Answer " + item.dataset.slot + " has no rank");
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".rank-item [data-move]");
    if (button) { move(button.closest(".rank-item"), button.dataset.move === "up" ? -1 : 1); }
  });

  // Alt+Up/Alt+Down on a card or its buttons (not on a select, where Alt+Down opens the list of options).
  document.addEventListener("keydown", function (event) {
    if (!event.altKey || event.ctrlKey || event.metaKey || (event.key !== "ArrowUp" && event.key !== "ArrowDown")) { return; }
    var target = event.target;
    if (!target.closest || !(target.matches(".rank-item") || target.matches(".rank-item button"))) { return; }
    event.preventDefault();
    move(target.closest(".rank-item"), event.key === "ArrowUp" ? -1 : 1);
  });

  // Drag: drop an answer above another, or on the zone after the list to put it last. Near the top or
  // bottom of the window the page scrolls, so a card can go anywhere in a long list.
  var dragged = null, speed = 0, scrolling = false;
  function scrollWhileNearEdge() {
    if (!dragged || !speed) { scrolling = false; return; }
    window.scrollBy(0, speed);
    window.requestAnimationFrame(scrollWhileNearEdge);
  }
  function endDrag() {
    if (dragged) { dragged.classList.remove("dragging"); }
    dragged = null; speed = 0;
    list.classList.remove("dragging-active");
  }

  document.addEventListener("dragstart", function (event) {
    var item = event.target.closest && event.target.closest(".rank-item");
    if (!item || readOnly) { return; }
    dragged = item;
    item.classList.add("dragging");
    list.classList.add("dragging-active");
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", "rank");
  });
  document.addEventListener("dragover", function (event) {
    if (!dragged) { return; }
    var y = event.clientY, height = window.innerHeight;
    speed = y < EDGE ? -Math.ceil((EDGE - y) / 4) : y > height - EDGE ? Math.ceil((y - height + EDGE) / 4) : 0;
    if (speed && !scrolling) { scrolling = true; window.requestAnimationFrame(scrollWhileNearEdge); }
    if (event.target.closest && event.target.closest(".rank-item, [data-drop-end]")) { event.preventDefault(); }
  });
  document.addEventListener("drop", function (event) {
    var target = event.target.closest && event.target.closest(".rank-item, [data-drop-end]");
    var item = dragged;
    endDrag();
    if (!item || !target || target === item) { return; }
    event.preventDefault();
    if (target.matches("[data-drop-end]")) { list.appendChild(item); } else { list.insertBefore(item, target); }
    numberInOrder(item);
  });
  document.addEventListener("dragend", endDrag);

  // Compact cards: a long answer shows its first lines until "Show all" is pressed.
  function clamp(item) {
    var text = item.querySelector(".answer-text");
    text.classList.add("clamped");
    if (text.scrollHeight <= text.clientHeight + 1) { text.classList.remove("clamped"); return; }
    var toggle = document.createElement("button");
    toggle.type = "button"; toggle.className = "link rank-show-all";
    toggle.setAttribute("aria-expanded", "false");
    toggle.textContent = "Show all of answer " + item.dataset.slot;
    toggle.addEventListener("click", function () {
      var open = text.classList.toggle("clamped") === false;
      toggle.setAttribute("aria-expanded", String(open));
      toggle.textContent = (open ? "Show less of answer " : "Show all of answer ") + item.dataset.slot;
    });
    text.insertAdjacentElement("afterend", toggle);
  }

  document.addEventListener("DOMContentLoaded", function () {
    list = document.querySelector("[data-ranking]");
    status = document.getElementById("rank-status");
    if (!list) { return; }
    // A submitted or someone else's task is shown read-only (its fieldset disabled): nothing moves.
    readOnly = Boolean(list.closest("fieldset:disabled"));
    items().forEach(function (item) {
      item.querySelector(".rank-moves").hidden = readOnly;
      item.draggable = !readOnly;
      clamp(item);
    });
    document.querySelector("[data-drop-end]").hidden = readOnly;
  });
}());
