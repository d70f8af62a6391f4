// Terminal recordings (asciicast, e.g. a Terminal-Bench trial's sessions/*.cast) played with
// asciinema's player, vendored in static/asciinema/ (scripts/asciinema/build.sh).
(function () {
  "use strict";
  if (!window.AsciinemaPlayer) return;
  // A closed recording's player is made when it is first opened (a player fetches its cast on play).
  document.querySelectorAll(".cast-player[data-cast-src]").forEach(function (el) {
    var details = el.closest("details");
    // Full screen: the player fits the screen's width, so a wide terminal reads at a normal size.
    if (el.requestFullscreen) {
      var full = document.createElement("button");
      full.type = "button";
      full.className = "cast-fullscreen secondary";
      full.textContent = "Full screen";
      full.addEventListener("click", function () { el.requestFullscreen(); });
      el.before(full);
    }
    var play = function () {
      if (el.dataset.made) return;
      el.dataset.made = "1";
      window.AsciinemaPlayer.create(el.dataset.castSrc, el, { fit: "width", idleTimeLimit: 2, terminalFontSize: "small" });
    };
    if (!details || details.open) play();
    else details.addEventListener("toggle", function () { if (details.open) play(); });
  });
})();
