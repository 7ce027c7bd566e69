"""S3Archive against a real moto server over HTTP."""

import json

import boto3
import pytest

from remedy.adapters.archive import ArchiveError, S3Archive
from tests.fixtures.prometheus import free_port


def test_put_json_creates_bucket_and_reads_back(aws_endpoint):
    archive = S3Archive("gpu-remedy-archive", region="us-east-1", endpoint_url=aws_endpoint)
    url = archive.put_json("audits/nfs/gpu074.json", {"verdict": "rpc-slot-starvation", "slot_wait_ms": 1495})
    assert url == "s3://gpu-remedy-archive/audits/nfs/gpu074.json"
    assert json.loads(archive.get("audits/nfs/gpu074.json")) == {"slot_wait_ms": 1495, "verdict": "rpc-slot-starvation"}
    # seen by an independent client: the bucket really exists with the right content type
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=aws_endpoint)
    head = s3.head_object(Bucket="gpu-remedy-archive", Key="audits/nfs/gpu074.json")
    assert head["ContentType"] == "application/json"


def test_put_text_in_other_region_and_existing_bucket(aws_endpoint):
    s3 = boto3.client("s3", region_name="eu-west-1", endpoint_url=aws_endpoint)
    s3.create_bucket(Bucket="rma", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    archive = S3Archive("rma", region="eu-west-1", endpoint_url=aws_endpoint)
    archive.put_text("gpu119/report.md", "# RMA\nXID 79\n", "text/markdown")
    assert archive.get("gpu119/report.md") == b"# RMA\nXID 79\n"
    assert s3.get_bucket_location(Bucket="rma")["LocationConstraint"] == "eu-west-1"
    fresh = S3Archive("new-eu-bucket", region="eu-west-1", endpoint_url=aws_endpoint)
    fresh.put_text("k", "v")
    assert s3.get_bucket_location(Bucket="new-eu-bucket")["LocationConstraint"] == "eu-west-1"


def test_dry_run_writes_nothing(aws_endpoint):
    archive = S3Archive("dry", region="us-east-1", endpoint_url=aws_endpoint, dry_run=True)
    assert archive.put_json("a.json", {"x": 1}) == "s3://dry/a.json"
    assert [(p.key, p.content_type) for p in archive.planned] == [("a.json", "application/json")]
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=aws_endpoint)
    assert s3.list_buckets()["Buckets"] == []


def test_missing_key_and_bad_input_are_clear_errors(aws_endpoint):
    archive = S3Archive("gpu-remedy-archive", region="us-east-1", endpoint_url=aws_endpoint)
    with pytest.raises(ArchiveError, match=r"s3://gpu-remedy-archive/nope: get failed: NoSuchKey"):
        archive.get("nope")
    with pytest.raises(ArchiveError, match="not JSON-serialisable"):
        loop: dict = {}
        loop["self"] = loop
        archive.put_json("x", loop)
    with pytest.raises(ArchiveError, match="bucket name is empty"):
        S3Archive("", region="us-east-1")


def test_unreachable_endpoint_is_a_clear_error():
    archive = S3Archive("b", region="us-east-1", endpoint_url=f"http://127.0.0.1:{free_port()}", timeout=1)
    with pytest.raises(ArchiveError, match="did not answer"):
        archive.put_text("k", "v")
