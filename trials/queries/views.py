"""The query box's suggestions (JSON) and a user's saved queries (pages)."""

from __future__ import annotations

from django import forms
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from trials import query
from trials.models import SavedQuery
from trials.queries import suggest


@require_safe
def query_suggest(request: HttpRequest) -> JsonResponse:
    """`?q=` the query's text up to the cursor: what may come next there (scope, prefix, items)."""
    return JsonResponse(suggest.suggest(request.GET.get("q", "")).as_json())


class SavedQueryForm(forms.ModelForm):
    class Meta:
        model = SavedQuery
        fields = ["name", "query"]
        widgets = {"query": forms.TextInput(attrs={"size": 48})}

    def clean_query(self) -> str:
        """Only a query that runs is kept: its link must list something, not an error."""
        text = self.cleaned_data["query"].strip()
        try:
            query.parse(text)
        except query.QueryError as error:
            raise forms.ValidationError(str(error), code="query") from None
        return text


def save_query(user, form: SavedQueryForm) -> SavedQuery:
    """The user's query of that name, made or replaced (a name is the user's own: unique per user)."""
    saved, _ = SavedQuery.objects.update_or_create(
        user=user, name=form.cleaned_data["name"].strip(), defaults={"query": form.cleaned_data["query"]}
    )
    return saved


@require_http_methods(["GET", "HEAD", "POST"])
def saved_queries(request: HttpRequest) -> HttpResponse:
    """GET: the user's saved queries, each a link to its list. POST name + query: save one, open its list."""
    form = SavedQueryForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid():
            return redirect(save_query(request.user, form).get_absolute_url())
    mine = SavedQuery.objects.filter(user=request.user.pk)
    status = 400 if form.errors else 200
    return render(request, "trials/saved_queries.html", {"saved": mine, "form": form}, status=status)


@require_POST
def delete_saved_query(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete one of the user's own saved queries (another's is a 404: not theirs to see)."""
    get_object_or_404(SavedQuery, pk=pk, user=request.user.pk).delete()
    back = request.POST.get("next", "")
    if back and url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        return redirect(back)
    return redirect("saved-queries")
