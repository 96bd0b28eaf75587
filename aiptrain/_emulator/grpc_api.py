"""The aiplatform v1 JobService and PipelineService over gRPC: the Vertex AI SDK's default transport.

The SDK (api_transport="grpc", its default) opens a TLS channel to `api_endpoint` and sends its
token as call credentials. `local serve` answers it on a second port with a certificate of its own
for 127.0.0.1 and localhost (`grpc_identity`), which the client trusts through
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH. Each method decodes the request with the SDK's own generated
messages, hands its JSON form to the REST handler of the same method (vertex_api, tuning_api,
pipelines_api: one implementation, the same checks and refusals) and encodes the answer back;
an ApiError becomes the gRPC status of the same name, its field violations a google.rpc.BadRequest.

What a caller may cost is bounded as on the REST port (`limits`): the token is checked by a server
interceptor, from the call's metadata, before its message is read into a protobuf (a refused call's
bytes are never parsed); no message may be larger than REST's body limit; and the server serves a
bounded number of calls at once, refusing the others with RESOURCE_EXHAUSTED before reading them.

grpcio and google-cloud-aiplatform are imported here only, when `local serve` starts this port;
without them the port is not served (they come with the `test` extra, or `pip install
google-cloud-aiplatform`).
"""

from __future__ import annotations

import datetime
import hmac
import logging
import os
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiptrain._emulator import limits, pipelines_api, tuning_api, vertex_api
from aiptrain._emulator.errors import ApiError, from_aiptrain_error
from aiptrain._emulator.services import Services
from aiptrain._paths import HomeLayout
from aiptrain.errors import AiptrainError

LOG = logging.getLogger("aiptrain._emulator.grpc")
JOB_SERVICE = "google.cloud.aiplatform.v1.JobService"
PIPELINE_SERVICE = "google.cloud.aiplatform.v1.PipelineService"
_VALID_DAYS = 3650


def available() -> bool:
    """Whether the packages the gRPC port needs are installed."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("grpc", "google.cloud.aiplatform_v1"))


@dataclass(frozen=True)
class GrpcIdentity:
    certificate_path: Path  # self-signed, for 127.0.0.1 and localhost: what clients trust
    key_path: Path


def grpc_identity(home: Path) -> GrpcIdentity:
    """The gRPC port's certificate and key under `home/emulator/grpc`, made on first use."""
    folder = HomeLayout(home).emulator_grpc
    identity = GrpcIdentity(folder / "localhost.pem", folder / "localhost-key.pem")
    if identity.certificate_path.is_file() and identity.key_path.is_file():
        return identity
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    certificate, key = _self_signed()
    fd = os.open(identity.key_path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as stream:
        stream.write(key)
    identity.certificate_path.write_bytes(certificate)
    return identity


def _self_signed() -> tuple[bytes, bytes]:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aiptrain local serve (gRPC, this machine only)")])
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.IPAddress(ipaddress.ip_address("::1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return (certificate.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


# -- the methods ---------------------------------------------------------------------------------

# (JSON request -> JSON answer) of one method, given the services.
Call = Callable[[Services, dict[str, Any]], dict[str, Any]]


def _where(services: Services, name: str, *, remember: bool) -> tuple[str, str, str]:
    """(project ID, location, the rest) of `projects/P/locations/L[/...]`; a number finds its project."""
    parts = name.split("/")
    if len(parts) < 4 or parts[0] != "projects" or parts[2] != "locations":
        raise ApiError("INVALID_ARGUMENT", f"Invalid resource name {name[:200]!r}.")
    project = parts[1]
    if remember and not project.isdigit():
        services.projects.number(project)
    return services.projects.project_id(project), parts[3], parts[-1] if len(parts) > 4 else ""


def _create(handler: Callable[..., dict[str, Any]], field: str) -> Call:
    def call(services: Services, request: dict[str, Any]) -> dict[str, Any]:
        project, location, _ = _where(services, str(request.get("parent", "")), remember=True)
        return handler(services, project, location, request.get(field) or {})

    return call


def _get(handler: Callable[..., dict[str, Any]]) -> Call:
    def call(services: Services, request: dict[str, Any]) -> dict[str, Any]:
        project, location, numeric_id = _where(services, str(request.get("name", "")), remember=False)
        return handler(services, project, location, numeric_id)

    return call


def _list(handler: Callable[..., dict[str, Any]]) -> Call:
    def call(services: Services, request: dict[str, Any]) -> dict[str, Any]:
        project, location, _ = _where(services, str(request.get("parent", "")), remember=False)
        query = {key: str(request[key]) for key in ("filter", "pageSize", "pageToken") if request.get(key)}
        return handler(services, project, location, query)

    return call


def _cancel(handler: Callable[..., dict[str, Any]]) -> Call:
    def call(services: Services, request: dict[str, Any]) -> dict[str, Any]:
        project, location, numeric_id = _where(services, str(request.get("name", "")), remember=True)
        return handler(services, project, location, numeric_id, {})

    return call


# service -> method -> (request type, response type, call); types are names in aiplatform_v1.
METHODS: dict[str, dict[str, tuple[str, str, Call]]] = {
    JOB_SERVICE: {
        "CreateCustomJob": ("CreateCustomJobRequest", "CustomJob", _create(vertex_api.create_custom_job,
                                                                           "customJob")),
        "GetCustomJob": ("GetCustomJobRequest", "CustomJob", _get(vertex_api.get_custom_job)),
        "ListCustomJobs": ("ListCustomJobsRequest", "ListCustomJobsResponse", _list(vertex_api.list_custom_jobs)),
        "CancelCustomJob": ("CancelCustomJobRequest", "Empty", _cancel(vertex_api.cancel_custom_job)),
        "CreateHyperparameterTuningJob": ("CreateHyperparameterTuningJobRequest", "HyperparameterTuningJob",
                                          _create(tuning_api.create_tuning_job, "hyperparameterTuningJob")),
        "GetHyperparameterTuningJob": ("GetHyperparameterTuningJobRequest", "HyperparameterTuningJob",
                                       _get(tuning_api.get_tuning_job)),
        "ListHyperparameterTuningJobs": ("ListHyperparameterTuningJobsRequest",
                                         "ListHyperparameterTuningJobsResponse", _list(tuning_api.list_tuning_jobs)),
        "CancelHyperparameterTuningJob": ("CancelHyperparameterTuningJobRequest", "Empty",
                                          _cancel(tuning_api.cancel_tuning_job)),
    },
    PIPELINE_SERVICE: {
        "CreateTrainingPipeline": ("CreateTrainingPipelineRequest", "TrainingPipeline",
                                   _create(pipelines_api.create_training_pipeline, "trainingPipeline")),
        "GetTrainingPipeline": ("GetTrainingPipelineRequest", "TrainingPipeline",
                                _get(pipelines_api.get_training_pipeline)),
        "ListTrainingPipelines": ("ListTrainingPipelinesRequest", "ListTrainingPipelinesResponse",
                                  _list(pipelines_api.list_training_pipelines)),
        "CancelTrainingPipeline": ("CancelTrainingPipelineRequest", "Empty",
                                   _cancel(pipelines_api.cancel_training_pipeline)),
    },
}


# -- the server ----------------------------------------------------------------------------------


def start_grpc_server(services: Services, *, host: str, port: int, token: str | None,
                      identity: GrpcIdentity) -> tuple[Any, int]:
    """A started grpc.Server for METHODS on host:port (0: a free port); (server, the port)."""
    import grpc

    workers = futures.ThreadPoolExecutor(max_workers=limits.GRPC_WORKERS, thread_name_prefix="aiptrain-grpc")
    server = grpc.server(workers, interceptors=[] if token is None else [_token_interceptor(token)],
                         options=limits.GRPC_SERVER_OPTIONS, maximum_concurrent_rpcs=limits.MAX_GRPC_CALLS)
    for service, methods in METHODS.items():
        handlers = {name: _handler(services, *spec) for name, spec in methods.items()}
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, handlers)])
    credentials = grpc.ssl_server_credentials([(identity.key_path.read_bytes(),
                                                identity.certificate_path.read_bytes())])
    bound = server.add_secure_port(f"[{host}]:{port}" if ":" in host else f"{host}:{port}", credentials)
    server.start()
    return server, bound


def _message_class(name: str) -> Any:
    """The protobuf class of an aiplatform v1 message (the SDK's proto-plus types wrap them)."""
    from google.cloud import aiplatform_v1
    from google.protobuf import empty_pb2

    return empty_pb2.Empty if name == "Empty" else getattr(aiplatform_v1, name).pb()


def _handler(services: Services, request_name: str, response_name: str, call: Call) -> Any:
    import grpc
    from google.protobuf import json_format

    request_class, response_class = _message_class(request_name), _message_class(response_name)

    def handle(request: Any, context: Any) -> Any:
        try:
            answer = call(services, json_format.MessageToDict(request))
            return json_format.ParseDict(answer, response_class(), ignore_unknown_fields=True)
        except ApiError as error:
            _abort(context, error)
        except AiptrainError as error:
            _abort(context, from_aiptrain_error(error, root=""))
        except Exception:
            LOG.exception("internal error serving %s", request_name)
            _abort(context, ApiError("INTERNAL", "Internal error in the aiptrain emulator."))

    return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=request_class.FromString,
                                               response_serializer=response_class.SerializeToString)


def _token_interceptor(token: str) -> Any:
    """A server interceptor that lets through only calls whose metadata carries `token`; the others
    get UNAUTHENTICATED from a handler without a deserializer, so their bytes are never parsed."""
    import grpc

    refusal = grpc.unary_unary_rpc_method_handler(_refuse_unauthenticated)
    expected = f"Bearer {token}".encode()

    class TokenFirst(grpc.ServerInterceptor):  # type: ignore[misc]
        def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
            sent = dict(details.invocation_metadata or ()).get("authorization", "")
            if hmac.compare_digest(str(sent).encode(), expected):
                return continuation(details)
            return refusal

    return TokenFirst()


def _refuse_unauthenticated(_request: bytes, context: Any) -> None:
    _abort(context, ApiError("UNAUTHENTICATED", "Request is missing a valid authentication credential: send the "
                             "token `aiptrain local serve` wrote as the call credentials."))


def _abort(context: Any, error: ApiError) -> None:
    import grpc
    from google.protobuf import any_pb2
    from google.rpc import error_details_pb2, status_pb2
    from grpc_status import rpc_status

    code = getattr(grpc.StatusCode, error.status, grpc.StatusCode.UNKNOWN)
    details = []
    if error.violations:
        bad_request = error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
            for v in error.violations])
        packed = any_pb2.Any()
        packed.Pack(bad_request)
        details.append(packed)
    status = status_pb2.Status(code=code.value[0], message=error.message, details=details)
    context.abort_with_status(rpc_status.to_status(status))
