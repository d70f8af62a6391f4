"""The imports page (the upload form, every import) and an import's page, its progress polled by
static/js/import_progress.js."""

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_safe

from core import limits, roles
from trials.models import Import
from trials.queue import import_upload
from trials.uploads.forms import UploadForm
from trials.viewer.pages import PAGE_SIZE  # the list pages' one page size


@limits.body_limited_by("IMPORT_MAX_UPLOAD_BYTES")  # (the files stream to disk as they arrive)
@roles.require_right(roles.READ, write=roles.IMPORT)
def imports(request):
    form = UploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        files = form.cleaned_data["files"]
        # A folder chosen in the form: each file's relative path, in the files' order (static/js/upload_paths.js).
        paths = request.POST.getlist("paths")
        names = [p or f.name for p, f in zip(paths, files, strict=True)] if len(paths) == len(files) else None
        created = [
            import_upload(f, names[i] if names else f.name, origin=Import.Origin.UPLOAD, user=request.user)
            for i, f in enumerate(files)
        ]
        # Said once, and true later too: the import pages show each one's live status.
        messages.success(request, f"{len(created)} file(s) uploaded.")
        if len(created) == 1:
            return redirect(created[0])
        return redirect("imports")
    page = Paginator(Import.objects.all(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "trials/imports.html", {"form": form, "page": page})


@require_safe
def import_detail(request, pk):
    imp = get_object_or_404(Import, pk=pk)
    return render(
        request, "trials/import_detail.html", {"import": imp, "recovery_interval": settings.IMPORT_RECOVERY_INTERVAL}
    )
