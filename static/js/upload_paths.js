// A folder chosen in the upload form: each file's path relative to it goes with it (`paths`, in the files'
// order), so the import reads the files as import_packs on that folder would (a TB1 submission folder
// names the configuration of the results files in it).
(function () {
  const form = document.querySelector("form[data-upload]");
  if (!form) return;
  const folder = form.querySelector("input[webkitdirectory]");
  const inputs = Array.from(form.querySelectorAll('input[type="file"][name="files"]'));
  folder.addEventListener("change", function () {
    inputs.forEach(function (input) {
      if (input !== folder) input.required = !folder.files.length;
    });
  });
  form.addEventListener("submit", function () {
    form.querySelectorAll('input[name="paths"]').forEach(function (el) { el.remove(); });
    inputs.forEach(function (input) {
      for (const file of input.files) {
        const path = document.createElement("input");
        path.type = "hidden";
        path.name = "paths";
        path.value = file.webkitRelativePath || file.name;
        form.appendChild(path);
      }
    });
  });
})();
