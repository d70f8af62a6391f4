// Terminal recordings (asciicast, e.g. a Terminal-Bench trial's sessions/*.cast) played with
// asciinema's player, vendored in static/asciinema/ (scripts/asciinema/build.sh).
(function () {
  "use strict";
  if (!window.AsciinemaPlayer) return;
  document.querySelectorAll(".cast-player[data-cast-src]").forEach(function (el) {
    window.AsciinemaPlayer.create(el.dataset.castSrc, el, { fit: "width", idleTimeLimit: 2, terminalFontSize: "small" });
  });
})();
