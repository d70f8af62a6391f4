"""factory_boy factories for the trials app models (shared by every test module)."""

from __future__ import annotations

import factory

from trials.models import Configuration, Dataset, Job, PermissionDecision, Task, Trial


class DatasetFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Dataset
        django_get_or_create = ("name", "version")

    name = "known-answer/tasks"
    version = "1.0"


class ConfigurationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Configuration
        django_get_or_create = ("key",)

    key = factory.Sequence(lambda n: f"config-{n}")
    role = Configuration.Role.NONE
    agent_name = "agent"
    agent_version = "1.0.0"
    model_name = ""
    profiles = factory.LazyFunction(dict)


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job
        django_get_or_create = ("key",)

    key = factory.Sequence(lambda n: f"job-{n}")
    name = factory.LazyAttribute(lambda o: o.key)
    source_format = "harbor"
    config = factory.LazyFunction(lambda: {"environment": {"type": "docker"}})


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task
        django_get_or_create = ("dataset", "name", "checksum")

    dataset = factory.SubFactory(DatasetFactory)
    name = factory.Sequence(lambda n: f"task-{n}")
    checksum = factory.LazyAttribute(lambda o: f"sha-{o.name}")


class TrialFactory(factory.django.DjangoModelFactory):
    """A scored Harbor-like trial: status follows the reward unless given."""

    class Meta:
        model = Trial

    key = factory.Sequence(lambda n: f"trial-{n}")
    name = factory.LazyAttribute(lambda o: o.key)
    source_format = "harbor"
    job = factory.SubFactory(JobFactory)
    task = factory.SubFactory(TaskFactory)
    dataset = factory.LazyAttribute(lambda o: o.task.dataset)
    configuration = factory.SubFactory(ConfigurationFactory)
    reward = 1.0
    status = factory.LazyAttribute(lambda o: "passed" if (o.reward or 0) >= 1.0 else "failed")
    rewards = factory.LazyAttribute(lambda o: {} if o.reward is None else {"reward": o.reward})
    is_complete = True


class PermissionDecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PermissionDecision

    trial = factory.SubFactory(TrialFactory)
    action_id = factory.Sequence(lambda n: f"action-{n}")
    decision = PermissionDecision.Decision.DENY
    side_effect_after_denial = False
