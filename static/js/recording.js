// Terminal recordings (asciicast, e.g. a Terminal-Bench trial's sessions/*.cast) played with
// asciinema's player, vendored in static/asciinema/ (scripts/asciinema/build.sh).
(function () {
  "use strict";
  if (!window.AsciinemaPlayer) return;
  // A closed recording's player is made when it is first opened (a player fetches its cast on play).
  document.querySelectorAll(".cast-player[data-cast-src]").forEach(function (el) {
    var details = el.closest("details");
    var play = function () {
      if (el.dataset.made) return;
      el.dataset.made = "1";
      window.AsciinemaPlayer.create(el.dataset.castSrc, el, { fit: "width", idleTimeLimit: 2, terminalFontSize: "small" });
    };
    if (!details || details.open) play();
    else details.addEventListener("toggle", function () { if (details.open) play(); });
  });
})();
