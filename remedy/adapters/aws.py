"""Cloud actions on a GPU node's instance through boto3 (EC2, Auto Scaling): reboot, terminate-and-replace, status.

`CloudNodes` is the capability the fix ladder needs from a cloud; `Ec2Nodes` implements it for AWS. Dry-run makes
only read calls (describe) and returns what it would have done, so a dry run of a reboot changes nothing.
The endpoint comes from `settings.aws.endpoint_url` (moto in server mode in tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from remedy.errors import RemedyError

# aws:///us-east-1a/i-0123456789abcdef0 (kubelet's providerID on EKS and self-managed EC2 nodes)
_PROVIDER_ID = re.compile(r"^aws://(?:/[a-z0-9-]*)?/(?P<id>i-[0-9a-f]{8,17})$")


class CloudError(RemedyError):
    """The cloud refused or could not be reached; the message names the instance and the call."""


def instance_id_from_provider_id(provider_id: str) -> str | None:
    """`aws:///<az>/<instance-id>` → instance id; None for a node that is not an EC2 instance (bare metal, GCP…)."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    m = _PROVIDER_ID.match(provider_id.strip())
    if not m:
        raise CloudError(f"providerID {provider_id!r} looks like AWS but has no instance id (want aws:///<az>/i-…)")
    return m.group("id")


@dataclass
class InstanceStatus:
    instance_id: str
    state: str  # pending | running | stopping | stopped | shutting-down | terminated
    system_status: str = "not-applicable"  # ok | impaired | initializing | insufficient-data | not-applicable
    instance_status: str = "not-applicable"
    availability_zone: str = ""

    @property
    def healthy(self) -> bool:
        return self.state == "running" and self.system_status in ("ok", "initializing", "not-applicable") and \
            self.instance_status in ("ok", "initializing", "not-applicable")


@dataclass
class CloudChange:
    """What a mutating call did (or, in dry-run, would have done)."""

    instance_id: str
    action: str  # reboot | terminate-in-asg | terminate-and-run
    dry_run: bool = False
    replacement_id: str | None = None  # launch-template path: the new instance
    detail: dict[str, Any] = field(default_factory=dict)


class CloudNodes(Protocol):
    dry_run: bool

    def reboot(self, instance_id: str) -> CloudChange: ...
    def terminate_and_replace(self, instance_id: str, *, asg_name: str | None = None,
                              launch_template: str | None = None) -> CloudChange: ...
    def describe_status(self, instance_id: str) -> InstanceStatus: ...


class Ec2Nodes:
    """CloudNodes over boto3's EC2 and Auto Scaling clients."""

    def __init__(self, *, region: str, endpoint_url: str | None = None, dry_run: bool = False,
                 timeout: float = 10.0) -> None:
        import boto3
        from botocore.config import Config

        self.region, self.endpoint_url, self.dry_run = region, endpoint_url, dry_run
        cfg = Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 3, "mode": "standard"})
        self._ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint_url, config=cfg)
        self._asg = boto3.client("autoscaling", region_name=region, endpoint_url=endpoint_url, config=cfg)

    @classmethod
    def from_settings(cls, settings: Any, *, dry_run: bool | None = None) -> Ec2Nodes:
        return cls(region=settings.aws.region, endpoint_url=settings.aws.endpoint_url,
                   dry_run=settings.dry_run if dry_run is None else dry_run)

    def _call(self, what: str, instance_id: str, fn, **kwargs) -> dict:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            out: dict = fn(**kwargs)
            return out
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise CloudError(f"{instance_id}: {what} failed: {err.get('Code')}: {err.get('Message')}") from None
        except BotoCoreError as exc:
            raise CloudError(f"{instance_id}: {what} failed: {exc}") from None

    def _require_instance(self, instance_id: str) -> dict:
        if not instance_id or not instance_id.startswith("i-"):
            raise CloudError(f"not an EC2 instance id: {instance_id!r}")
        out = self._call("describe_instances", instance_id, self._ec2.describe_instances, InstanceIds=[instance_id])
        for res in out.get("Reservations", []):
            for inst in res.get("Instances", []):
                if inst.get("InstanceId") == instance_id:
                    found: dict = inst
                    return found
        raise CloudError(f"{instance_id}: no such instance in {self.region}")

    def describe_status(self, instance_id: str) -> InstanceStatus:
        inst = self._require_instance(instance_id)
        out = self._call("describe_instance_status", instance_id, self._ec2.describe_instance_status,
                         InstanceIds=[instance_id], IncludeAllInstances=True)
        st: dict = next((s for s in out.get("InstanceStatuses", []) if s.get("InstanceId") == instance_id), {})
        return InstanceStatus(
            instance_id=instance_id,
            state=(st.get("InstanceState") or inst.get("State") or {}).get("Name", "unknown"),
            system_status=(st.get("SystemStatus") or {}).get("Status", "not-applicable"),
            instance_status=(st.get("InstanceStatus") or {}).get("Status", "not-applicable"),
            availability_zone=st.get("AvailabilityZone") or (inst.get("Placement") or {}).get("AvailabilityZone", ""),
        )

    def reboot(self, instance_id: str) -> CloudChange:
        inst = self._require_instance(instance_id)
        state = (inst.get("State") or {}).get("Name")
        if state != "running":
            raise CloudError(f"{instance_id}: cannot reboot an instance that is {state}")
        if self.dry_run:
            return CloudChange(instance_id, "reboot", dry_run=True, detail={"would": "ec2.reboot_instances"})
        self._call("reboot_instances", instance_id, self._ec2.reboot_instances, InstanceIds=[instance_id])
        return CloudChange(instance_id, "reboot")

    def terminate_and_replace(self, instance_id: str, *, asg_name: str | None = None,
                              launch_template: str | None = None) -> CloudChange:
        """ASG: terminate without decrementing desired capacity (the group launches the replacement).
        Launch template: terminate, then run one instance from the template (name or lt-… id)."""
        if bool(asg_name) == bool(launch_template):
            raise CloudError(f"{instance_id}: terminate_and_replace needs exactly one of asg_name or launch_template")
        inst = self._require_instance(instance_id)
        if asg_name:
            groups = self._call("describe_auto_scaling_groups", instance_id, self._asg.describe_auto_scaling_groups,
                                AutoScalingGroupNames=[asg_name]).get("AutoScalingGroups", [])
            if not groups:
                raise CloudError(f"{instance_id}: no Auto Scaling group named {asg_name!r}")
            members = {i["InstanceId"] for i in groups[0].get("Instances", [])}
            if instance_id not in members:
                raise CloudError(f"{instance_id}: not a member of Auto Scaling group {asg_name!r}")
            if self.dry_run:
                return CloudChange(instance_id, "terminate-in-asg", dry_run=True, detail={"asg": asg_name})
            self._call("terminate_instance_in_auto_scaling_group", instance_id,
                       self._asg.terminate_instance_in_auto_scaling_group,
                       InstanceId=instance_id, ShouldDecrementDesiredCapacity=False)
            return CloudChange(instance_id, "terminate-in-asg", detail={"asg": asg_name})
        assert launch_template is not None  # exactly one of asg_name / launch_template (checked above)
        spec = {"LaunchTemplateId": launch_template} if launch_template.startswith("lt-") else \
            {"LaunchTemplateName": launch_template}
        self._call("describe_launch_templates", instance_id, self._ec2.describe_launch_templates,
                   **({"LaunchTemplateIds": [launch_template]} if "LaunchTemplateId" in spec
                      else {"LaunchTemplateNames": [launch_template]}))
        if self.dry_run:
            return CloudChange(instance_id, "terminate-and-run", dry_run=True, detail={"launch_template": launch_template})
        placement = {"AvailabilityZone": (inst.get("Placement") or {}).get("AvailabilityZone")} \
            if (inst.get("Placement") or {}).get("AvailabilityZone") else {}
        self._call("terminate_instances", instance_id, self._ec2.terminate_instances, InstanceIds=[instance_id])
        out = self._call("run_instances", instance_id, self._ec2.run_instances, LaunchTemplate=spec,
                         MinCount=1, MaxCount=1, **({"Placement": placement} if placement else {}))
        new_id = out["Instances"][0]["InstanceId"]
        return CloudChange(instance_id, "terminate-and-run", replacement_id=new_id,
                           detail={"launch_template": launch_template})
