// The flag review page (console/flag_review.html). A refused decision comes back as a 400 with the
// judgement and the reason in it: htmx swaps no 4xx response by itself, so it is let through here.
(function () {
  "use strict";
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (event.detail.xhr.status === 400 && target && target.classList.contains("flag-review")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
}());
