// Step review (tasks/step_review.html): one step at a time, n / p to move, 1-3 to rate (tasks.js handles
// the digits on the focused radio group). The reason shows only for a bad step and is cleared otherwise
// (the server refuses a reason on a good step), and the first bad step follows the ratings: the earliest
// step rated bad. No inline scripts (CSP).
(function () {
  "use strict";
  var review = document.querySelector("[data-step-review]");
  if (!review) { return; }
  var steps = Array.prototype.slice.call(review.querySelectorAll("[data-step]"));
  if (!steps.length) { return; }
  var nav = review.querySelector("[data-step-nav]");
  var position = review.querySelector("[data-step-position]");
  var firstBad = review.querySelector("[data-first-bad]");
  var current = 0;

  function rating(step) {
    var checked = step.querySelector("input[data-step-rating]:checked");
    return checked ? checked.value : "";
  }

  function show(index, focus) {
    current = Math.max(0, Math.min(steps.length - 1, index));
    steps.forEach(function (step, i) { step.hidden = i !== current; });
    position.textContent = "Step " + (current + 1) + " of " + steps.length;
    if (focus) {
      var radio = steps[current].querySelector("input[data-step-rating]:checked") ||
        steps[current].querySelector("input[data-step-rating]");
      radio.focus();
    }
  }

  function syncWhy(step) {
    var bad = rating(step) === "bad";
    var why = step.querySelector("[data-step-why]");
    why.hidden = !bad;
    if (!bad) {
      var select = why.querySelector("select");
      if (select.value) { select.value = ""; select.dispatchEvent(new Event("change", { bubbles: true })); }
    }
  }

  function syncFirstBad() {
    for (var i = 0; i < steps.length; i++) {
      if (rating(steps[i]) === "bad") { firstBad.value = steps[i].dataset.step; return; }
    }
    firstBad.value = "";
  }

  steps.forEach(syncWhy);
  nav.hidden = false;
  // Start at the first step with an error, else the first unrated one: where the labeler left off.
  var start = steps.findIndex(function (step) { return step.classList.contains("has-error"); });
  if (start < 0) { start = steps.findIndex(function (step) { return !rating(step); }); }
  show(start < 0 ? 0 : start, false);

  review.addEventListener("change", function (event) {
    var step = event.target.closest("[data-step]");
    if (step && event.target.matches("input[data-step-rating]")) {
      syncWhy(step);
      syncFirstBad();
      firstBad.dispatchEvent(new Event("change", { bubbles: true }));
    }
  });
  nav.addEventListener("click", function (event) {
    var button = event.target.closest("[data-step-move]");
    if (button) { show(current + Number(button.dataset.stepMove), true); }
  });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var typing = event.target.matches && event.target.matches("input:not([type=radio]), textarea, select");
    if (typing || (event.key !== "n" && event.key !== "p")) { return; }
    event.preventDefault();
    show(current + (event.key === "n" ? 1 : -1), true);
  });
})();
