"""S3 archive for RMA reports and audit results (boto3 only), or a local directory (`aws.archive_dir`).

Dry-run records what would have been written and writes nothing (`planned` keeps the keys), so a flow's
dry run shows the archive step without touching the bucket.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from remedy.errors import RemedyError


class ArchiveError(RemedyError):
    """S3 refused or could not be reached; the message names the bucket and key."""


@dataclass
class PlannedWrite:
    key: str
    content_type: str
    size: int


class Archive(Protocol):
    """Where RMA reports and audit results are kept: S3Archive or LocalArchive (`open_archive`)."""

    dry_run: bool
    planned: list[PlannedWrite]

    def put_text(self, key: str, text: str, content_type: str = ...) -> str: ...
    def put_json(self, key: str, obj: Any) -> str: ...
    def get(self, key: str) -> bytes: ...


class S3Archive:
    """put_json / put_text / get against one bucket, created on first write if missing."""

    def __init__(self, bucket: str, *, region: str, endpoint_url: str | None = None, dry_run: bool = False,
                 timeout: float = 10.0) -> None:  # fmt: skip
        import boto3
        from botocore.config import Config

        if not bucket:
            raise ArchiveError("archive bucket name is empty (set aws.archive_bucket)")
        self.bucket, self.region, self.endpoint_url, self.dry_run = bucket, region, endpoint_url, dry_run
        self.planned: list[PlannedWrite] = []
        self._ready = False
        cfg = Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 3, "mode": "standard"})
        self._s3 = boto3.client("s3", region_name=region, endpoint_url=endpoint_url, config=cfg)

    def _call(self, what: str, key: str, fn, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(**kwargs)
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise ArchiveError(f"s3://{self.bucket}/{key}: {what} failed: {err.get('Code')}: {err.get('Message')}") from None
        except BotoCoreError as exc:
            raise ArchiveError(f"s3://{self.bucket}/{key}: {what} failed: {exc}") from None

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist (idempotent)."""
        if self._ready or self.dry_run:
            return
        from botocore.exceptions import ClientError

        try:
            self._s3.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
                raise ArchiveError(f"s3://{self.bucket}: cannot check the bucket: {exc}") from None
            kwargs: dict[str, Any] = {"Bucket": self.bucket}
            if self.region != "us-east-1":  # S3 rejects an explicit us-east-1 location constraint
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
            try:
                self._s3.create_bucket(**kwargs)
            except ClientError as exc2:
                if exc2.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou",):
                    raise ArchiveError(f"s3://{self.bucket}: cannot create the bucket: {exc2}") from None
        except Exception as exc:  # botocore connection errors
            if isinstance(exc, RemedyError):
                raise
            raise ArchiveError(f"s3://{self.bucket}: S3 at {self.endpoint_url or 'AWS'} did not answer: {exc}") from None
        self._ready = True

    def put_text(self, key: str, text: str, content_type: str = "text/plain; charset=utf-8") -> str:
        """Write `text` at `key`; returns the s3:// URL (also in dry-run, where nothing is written)."""
        body = text.encode("utf-8")
        url = f"s3://{self.bucket}/{key}"
        if self.dry_run:
            self.planned.append(PlannedWrite(key, content_type, len(body)))
            return url
        self.ensure_bucket()
        self._call("put", key, self._s3.put_object, Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)
        return url

    def put_json(self, key: str, obj: Any) -> str:
        return self.put_text(key, _json_text(f"s3://{self.bucket}/{key}", obj), "application/json")

    def get(self, key: str) -> bytes:
        """The object's bytes; ArchiveError naming the key if it is missing."""
        self.ensure_bucket()
        resp = self._call("get", key, self._s3.get_object, Bucket=self.bucket, Key=key)
        body: bytes = resp["Body"].read()
        return body


class LocalArchive:
    """The same writes as S3Archive, as files under a directory (the embedded stack, which has no S3)."""

    def __init__(self, root: str | Path, *, dry_run: bool = False) -> None:
        self.root, self.dry_run = Path(root), dry_run
        self.planned: list[PlannedWrite] = []

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ArchiveError(f"{key}: an archive key stays under {self.root}")
        return path

    def put_text(self, key: str, text: str, content_type: str = "text/plain; charset=utf-8") -> str:
        path = self._path(key)
        if self.dry_run:
            self.planned.append(PlannedWrite(key, content_type, len(text.encode("utf-8"))))
            return path.as_uri()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ArchiveError(f"{path}: cannot write the archive file: {exc.strerror or exc}") from None
        return path.as_uri()

    def put_json(self, key: str, obj: Any) -> str:
        return self.put_text(key, _json_text(key, obj), "application/json")

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except OSError:
            raise ArchiveError(f"{self._path(key)}: no such archive file") from None


def open_archive(aws: Any, *, dry_run: bool = False) -> Archive:
    """The archive the settings name: files under aws.archive_dir when set, else the S3 bucket."""
    if aws.archive_dir:
        return LocalArchive(aws.archive_dir, dry_run=dry_run)
    return S3Archive(aws.archive_bucket, region=aws.region, endpoint_url=aws.endpoint_url, dry_run=dry_run)


def _json_text(where: str, obj: Any) -> str:
    """The archive's JSON form of `obj` (both archives write the same bytes); ArchiveError naming `where`."""
    try:
        return json.dumps(obj, indent=2, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise ArchiveError(f"{where}: not JSON-serialisable: {exc}") from None
