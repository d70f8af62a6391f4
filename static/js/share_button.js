// The "Share" button of the trial, comparison, grid and QC item pages: POST /api/shares/ with
// what the button names (data-share, JSON) and the chosen expiry, then show the link with a copy
// button. When the user already has a live link to it (409), say so and offer "another link",
// "revoke it and make a new one" or "revoke it": its address was shown once and is not kept.
(function () {
  "use strict";
  function csrf() {
    const m = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function when(iso) {
    return iso.replace("T", " ").slice(0, 16) + " UTC";
  }
  function send(method, url, body) {
    return fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf() },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(function (response) {
      if (response.status === 204) return [response, {}];
      return response.json().then(function (data) { return [response, data]; });
    });
  }
  document.querySelectorAll("[data-share]").forEach(function (button) {
    const box = document.getElementById(button.dataset.shareBox);
    const expiry = document.getElementById(button.dataset.shareExpiry);
    const made = box.querySelector(".share-made");
    const input = box.querySelector("input");
    const note = box.querySelector(".share-expiry");
    const existing = box.querySelector(".share-existing");
    let live = [];

    function show(response, body) {
      box.hidden = false;
      existing.hidden = true;
      if (response.status === 409) {
        live = body.existing;
        const newest = live[0];
        made.hidden = true;
        note.textContent = "You already have a live link to this, made " + when(newest.created_at) +
          ", expiring " + when(newest.expires_at) + " (" + newest.views + " views). Its address was shown once," +
          " when it was made: copy it from where you saved it, or";
        existing.hidden = false;
        return;
      }
      if (!response.ok) {
        made.hidden = true;
        note.textContent = "Not shared: " + (body.detail || JSON.stringify(body));
        return;
      }
      made.hidden = false;
      input.value = body.url;
      note.textContent = "expires " + when(body.expires_at);
      input.select();
    }
    function create(ifExists) {
      const body = JSON.parse(button.dataset.share);
      body.expires_in_days = Number(expiry.value);
      body.if_exists = ifExists;
      return send("POST", button.dataset.shareApi, body).then(function (answer) { show(answer[0], answer[1]); });
    }
    button.addEventListener("click", function () { create("offer"); });
    existing.querySelectorAll("[data-share-action]").forEach(function (action) {
      action.addEventListener("click", function () {
        const what = action.dataset.shareAction;
        if (what !== "revoke") {
          create(what);
          return;
        }
        Promise.all(live.map(function (share) { return send("DELETE", button.dataset.shareApi + share.id + "/"); }))
          .then(function (answers) {
            existing.hidden = true;
            const refused = answers.filter(function (answer) { return !answer[0].ok; }).length;
            note.textContent = refused ? "Not revoked (" + refused + " refused)" : "Revoked: the link answers 404 from now on.";
          });
      });
    });
    box.querySelector(".copy-share").addEventListener("click", function () {
      navigator.clipboard.writeText(input.value).then(function () { note.textContent += " · copied"; });
    });
  });
})();
