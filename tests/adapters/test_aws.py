"""Ec2Nodes against moto in server mode on a loopback port (reboot, terminate-and-replace, describe, dry-run)."""

from __future__ import annotations

import boto3
import pytest

from remedy.adapters.aws import CloudError, Ec2Nodes, instance_id_from_provider_id

REGION = "us-east-1"
AMI = "ami-12c6146b"  # one of moto's built-in AMIs


def _clients(endpoint):
    return (boto3.client("ec2", region_name=REGION, endpoint_url=endpoint),
            boto3.client("autoscaling", region_name=REGION, endpoint_url=endpoint))


def _instance(ec2) -> str:
    return ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, InstanceType="p5.48xlarge")["Instances"][0]["InstanceId"]


def _template(ec2, name="gpu-node") -> str:
    return ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": AMI, "InstanceType": "p5.48xlarge"})["LaunchTemplate"]["LaunchTemplateId"]


def _running(ec2) -> set[str]:
    out = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running", "pending"]}])
    return {i["InstanceId"] for r in out["Reservations"] for i in r["Instances"]}


def test_provider_id_parsing():
    assert instance_id_from_provider_id("aws:///us-east-1a/i-0123456789abcdef0") == "i-0123456789abcdef0"
    assert instance_id_from_provider_id("aws:///i-0abc12345") == "i-0abc12345"
    assert instance_id_from_provider_id("gce://proj/us-central1-a/node-1") is None
    assert instance_id_from_provider_id("") is None
    with pytest.raises(CloudError, match="no instance id"):
        instance_id_from_provider_id("aws:///us-east-1a/not-an-instance")


def test_describe_and_reboot(aws_endpoint):
    ec2, _ = _clients(aws_endpoint)
    iid = _instance(ec2)
    cloud = Ec2Nodes(region=REGION, endpoint_url=aws_endpoint)
    status = cloud.describe_status(iid)
    assert status.state == "running" and status.healthy
    assert status.availability_zone.startswith(REGION)
    change = cloud.reboot(iid)
    assert change.action == "reboot" and not change.dry_run
    assert cloud.describe_status(iid).state == "running"  # a reboot keeps the instance


def test_unknown_instance_is_a_clear_error(aws_endpoint):
    cloud = Ec2Nodes(region=REGION, endpoint_url=aws_endpoint)
    with pytest.raises(CloudError, match="i-00000000deadbeef0"):
        cloud.reboot("i-00000000deadbeef0")
    with pytest.raises(CloudError, match="not an EC2 instance id"):
        cloud.describe_status("gpu042")


def test_terminate_in_asg_keeps_desired_capacity(aws_endpoint):
    ec2, asg = _clients(aws_endpoint)
    lt = _template(ec2)
    asg.create_auto_scaling_group(AutoScalingGroupName="gpu-pool", MinSize=2, MaxSize=4, DesiredCapacity=2,
                                  LaunchTemplate={"LaunchTemplateId": lt}, AvailabilityZones=[f"{REGION}a"])
    members = [i["InstanceId"] for i in asg.describe_auto_scaling_groups(
        AutoScalingGroupNames=["gpu-pool"])["AutoScalingGroups"][0]["Instances"]]
    assert len(members) == 2
    victim = members[0]
    cloud = Ec2Nodes(region=REGION, endpoint_url=aws_endpoint)
    change = cloud.terminate_and_replace(victim, asg_name="gpu-pool")
    assert change.action == "terminate-in-asg"
    group = asg.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu-pool"])["AutoScalingGroups"][0]
    assert group["DesiredCapacity"] == 2  # ShouldDecrementDesiredCapacity=False: the group replaces it
    now = {i["InstanceId"] for i in group["Instances"]}
    assert victim not in now and len(now) == 2
    with pytest.raises(CloudError, match="not a member"):
        cloud.terminate_and_replace(_instance(ec2), asg_name="gpu-pool")


def test_terminate_and_run_from_launch_template(aws_endpoint):
    ec2, _ = _clients(aws_endpoint)
    _template(ec2, "gpu-node")
    iid = _instance(ec2)
    cloud = Ec2Nodes(region=REGION, endpoint_url=aws_endpoint)
    change = cloud.terminate_and_replace(iid, launch_template="gpu-node")
    assert change.replacement_id and change.replacement_id != iid
    assert cloud.describe_status(iid).state in ("shutting-down", "terminated")
    assert change.replacement_id in _running(ec2)
    with pytest.raises(CloudError, match="exactly one"):
        cloud.terminate_and_replace(change.replacement_id)


def test_dry_run_changes_nothing(aws_endpoint):
    ec2, asg = _clients(aws_endpoint)
    lt = _template(ec2)
    asg.create_auto_scaling_group(AutoScalingGroupName="gpu-pool", MinSize=1, MaxSize=2, DesiredCapacity=1,
                                  LaunchTemplate={"LaunchTemplateId": lt}, AvailabilityZones=[f"{REGION}a"])
    member = asg.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu-pool"])["AutoScalingGroups"][0][
        "Instances"][0]["InstanceId"]
    loose = _instance(ec2)
    before = _running(ec2)
    cloud = Ec2Nodes(region=REGION, endpoint_url=aws_endpoint, dry_run=True)
    assert cloud.reboot(loose).dry_run
    assert cloud.terminate_and_replace(member, asg_name="gpu-pool").dry_run
    planned = cloud.terminate_and_replace(loose, launch_template=lt)
    assert planned.dry_run and planned.replacement_id is None
    assert _running(ec2) == before  # nothing terminated, nothing launched
