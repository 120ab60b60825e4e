// Task pages: the quiet timer of the progress line. The server renders the time so far; this only ticks it
// (mm:ss, at most once a second, while the tab is visible) and hides it on request, remembered across tasks.
(function () {
  "use strict";

  var KEY = "webgpt.taskTimerHidden";
  var timer = document.querySelector("[data-timer]");
  var clock = document.querySelector("[data-task-timer]");
  var toggle = document.querySelector("[data-timer-toggle]");
  if (!timer || !clock || !toggle) { return; }

  function remembered() {
    try { return window.localStorage.getItem(KEY) === "1"; } catch (e) { return false; }
  }
  function remember(hidden) {
    try { window.localStorage.setItem(KEY, hidden ? "1" : "0"); } catch (e) { /* private mode: not kept */ }
  }
  function show(hidden) {
    timer.hidden = hidden;
    toggle.textContent = hidden ? "Show timer" : "Hide timer";
  }

  show(remembered());
  toggle.hidden = false;  // without this script the button could do nothing, so it starts hidden
  toggle.addEventListener("click", function () {
    var hidden = !timer.hidden;
    show(hidden);
    remember(hidden);
  });

  function format(seconds) {
    var minutes = Math.floor(seconds / 60), rest = seconds % 60;
    return (minutes < 10 ? "0" : "") + minutes + ":" + (rest < 10 ? "0" : "") + rest;
  }

  if (!clock.hasAttribute("data-ticking")) { return; }  // a submitted or read-only task: the time stands
  var seconds = Number(clock.dataset.seconds) || 0;
  var last = Date.now();
  window.setInterval(function () {
    var now = Date.now();
    // Time in a background tab does not count, as the server's active time does not.
    if (document.visibilityState === "visible") { seconds += (now - last) / 1000; }
    last = now;
    var text = format(Math.floor(seconds));
    if (clock.textContent !== text) { clock.textContent = text; }
  }, 1000);
})();
