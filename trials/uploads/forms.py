"""The upload form: files, or a folder with each file's relative path."""

from django import forms


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = list(data) if isinstance(data, (list, tuple)) else [data]
        cleaned, errors = [], []
        for file in files:
            try:
                cleaned.append(super().clean(file, initial))
            except forms.ValidationError as exc:  # said of that file, so the user knows which
                name = getattr(file, "name", "")
                errors += [f"{name}: {message}" if name and len(files) > 1 else message for message in exc.messages]
        if errors:
            raise forms.ValidationError(errors)
        return cleaned


class UploadForm(forms.Form):
    # A field named `files`: the stubs see it override Form.files (the uploaded data), which the metaclass,
    # taking declared fields off the class, never lets it do.
    files = MultipleFileField(  # type: ignore[assignment]
        help_text="Trial packs: JSON, JSONL, TOML, .zip, .tar.gz or .tgz. Several at once."
    )
