from __future__ import annotations

import pytest
import torch

from pytest_gpuperf.errors import ConfigError
from pytest_gpuperf.gpu import cuda_synchronize, resolve_device

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")


@pytest.mark.parametrize("spec", ["cpu", "CPU", " cpu "])
def test_cpu_spellings(spec: str) -> None:
    assert resolve_device(spec) == torch.device("cpu")


def test_auto_picks_cuda_only_when_available() -> None:
    device = resolve_device("auto")
    if torch.cuda.is_available():
        assert device == torch.device("cuda", torch.cuda.current_device())
    else:
        assert device == torch.device("cpu")


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cuda:-1", "cuda0", "mps", "", "cuda:0:1"])
def test_bad_specs_name_the_input_and_the_accepted_forms(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_device(spec)
    message = str(info.value)
    assert repr(spec) in message
    assert '"cuda:N"' in message


@no_cuda
@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "CUDA:1"])
def test_cuda_request_without_cuda_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="CUDA is not available"):
        resolve_device(spec)


def test_cuda_synchronize_on_cpu_is_a_no_op() -> None:
    cuda_synchronize(torch.device("cpu"))  # nothing to wait for, must not touch CUDA
