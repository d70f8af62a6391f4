// The "Share" button of the trial, comparison, grid and QC item pages: POST /api/shares/ with
// what the button names (data-share, JSON), then show the link with a copy button.
(function () {
  "use strict";
  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  document.querySelectorAll("[data-share]").forEach(function (button) {
    const box = document.getElementById(button.dataset.shareBox);
    button.addEventListener("click", function () {
      fetch(button.dataset.shareApi, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf() },
        body: button.dataset.share,
      })
        .then(function (response) { return response.json().then(function (body) { return [response, body]; }); })
        .then(function (answer) {
          const response = answer[0], body = answer[1];
          box.hidden = false;
          const input = box.querySelector("input");
          const note = box.querySelector(".share-expiry");
          if (!response.ok) {
            input.value = "";
            note.textContent = "Not shared: " + (body.detail || JSON.stringify(body));
            return;
          }
          input.value = body.url;
          note.textContent = "expires " + body.expires_at.replace("T", " ").slice(0, 16) + " UTC";
          input.select();
        });
    });
    box.querySelector(".copy-share").addEventListener("click", function () {
      const input = box.querySelector("input");
      navigator.clipboard.writeText(input.value).then(function () { box.querySelector(".share-expiry").textContent += " · copied"; });
    });
  });
})();
