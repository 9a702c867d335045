"""Problem tags from a KernelBench file's name and the calls in its code (issue 30: "norm" was on 213
of KernelBench's 270 problems, matmuls included, because "RMS" matched "peRforMS" in docstrings).
Names are KernelBench's own; the sources are short ones written here in its style, docstrings
included, since a docstring must never tag a problem."""

from __future__ import annotations

import json
import re

import pytest

from leaderboard.demo import FIELD_FIGURES
from problems.kernelbench_files import TAG_RULES, guess_tags


def source(body: str, doc: str = "Performs a single operation. Normalizes nothing; see RMS notes.") -> str:
    return f'''import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """{doc}"""

    def __init__(self, scale_factor: float = 2.0):
        super().__init__()
        self.scale = scale_factor  # conv, softmax and pooling are words, not calls

    def forward(self, x, y):
        {body}

def get_inputs():
    return [torch.randn(8, 8), torch.randn(8, 8)]

def get_init_inputs():
    return []
'''


MATMUL = source("return torch.matmul(x, y)", "Simple model that performs a single matrix multiplication (C = A * B)")

# Every level-1 matmul of KernelBench: "matmul" and nothing else, whatever the docstring says.
MATMUL_NAMES = [
    "Square_matrix_multiplication_", "Standard_matrix_multiplication_", "Batched_matrix_multiplication",
    "Matrix_vector_multiplication_", "Matmul_with_large_K_dimension_", "Matmul_with_small_K_dimension_",
    "Matmul_with_irregular_shapes_", "Tall_skinny_matrix_multiplication_", "3D_tensor_matrix_multiplication",
    "4D_tensor_matrix_multiplication", "Matmul_with_diagonal_matrices_", "Matmul_for_symmetric_matrices",
    "Matmul_for_upper_triangular_matrices", "Matmul_for_lower_triangular_matrices", "Matmul_with_transposed_A",
    "Matmul_with_transposed_B", "Matmul_with_transposed_both",
]  # fmt: skip


@pytest.mark.parametrize("name", MATMUL_NAMES)
def test_a_matmul_is_tagged_matmul_only(name):
    assert guess_tags(1, name, MATMUL) == "matmul"


@pytest.mark.parametrize(
    ("level", "name", "body", "tags"),
    [
        (1, "Matrix_scalar_multiplication", "return x * 3.0", "elementwise"),
        (1, "RMSNorm_", "return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)", "norm,reduction"),
        (1, "BatchNorm", "return nn.BatchNorm2d(8)(x)", "norm"),
        (1, "FrobeniusNorm_", "return x / torch.norm(x, p='fro')", "norm"),
        (1, "LayerNorm", "return F.layer_norm(x, x.shape[1:])", "norm"),
        (1, "Max_Pooling_1D", "return nn.MaxPool1d(2)(x)", "pooling"),
        (1, "Max_reduction_over_a_dimension", "return torch.max(x, dim=1)[0]", "reduction"),
        (1, "LeakyReLU", "return F.leaky_relu(x, 0.01)", "activation"),
        (1, "HardSigmoid", "return F.hardsigmoid(x)", "activation"),
        (1, "MinGPTNewGelu", "return 0.5 * x * (1.0 + torch.tanh(x))", "activation"),
        (1, "LogSoftmax", "return torch.log_softmax(x, dim=1)", "softmax"),
        (1, "conv_transposed_2D__square_input__square_kernel", "return nn.ConvTranspose2d(8, 8, 3)(x)", "conv"),
        (1, "HuberLoss", "return F.smooth_l1_loss(x, y)", "loss"),
        (1, "ScaledDotProductAttention", "return F.scaled_dot_product_attention(x, y, y)", "attention"),
        (1, "cumsum", "return torch.cumsum(x, dim=1)", "reduction"),
        (2, "Gemm_Multiply_LeakyReLU", "return F.leaky_relu(nn.Linear(8, 8)(x) * 2.0)",
         "fused,matmul,activation,elementwise"),
        (2, "Conv2d_InstanceNorm_Divide", "return nn.InstanceNorm2d(8)(nn.Conv2d(8, 8, 3)(x)) / 2.0",
         "fused,conv,norm,elementwise"),
        (2, "Matmul_Dropout_Softmax", "return torch.softmax(F.dropout(x @ y), dim=1)", "fused,matmul,softmax"),
        (3, "LSTM", "return nn.Linear(8, 8)(nn.LSTM(8, 8)(x)[0])", "model,matmul,recurrent"),
        (3, "VanillaRNNHidden", "return torch.tanh(nn.Linear(8, 8)(x))", "model,matmul,activation,recurrent"),
        (3, "GRUBidirectional", "return nn.GRU(8, 8, bidirectional=True)(x)[0]", "model,recurrent"),
        (3, "ResNetBasicBlock", "return F.relu(nn.BatchNorm2d(8)(nn.Conv2d(8, 8, 3)(x)))", "model,conv,norm,activation"),
    ],
)  # fmt: skip
def test_tags_come_from_the_name_and_the_calls(level, name, body, tags):
    assert guess_tags(level, name, source(body)) == tags


def test_words_in_docstrings_comments_and_variables_tag_nothing():
    text = source("scale = self.scale\n        return x.relu() * scale", "Performs RMS norm, conv and softmax pooling")
    assert guess_tags(1, "Mystery_op", text) == "activation"  # the one call that names an operation: relu()


def test_the_committed_field_figures_tag_no_problem_of_levels_1_and_2_norm_unless_its_name_says_so():
    # seed_demo stores these tags as they are (the file has no problem text to tag it from), so a file
    # written under older rules puts "norm" on matmuls and ReLU: rewrite it with export_field_figures.
    figures = json.loads(FIELD_FIGURES.read_text(encoding="utf-8"))
    wrongly_normed = [
        problem["name"]
        for problem in figures["problems"]
        if problem["level"] in (1, 2)
        and "norm" in problem["tags"].split(",")
        and not re.search(TAG_RULES["norm"][0], problem["name"].replace("_", " ").lower())
    ]
    assert wrongly_normed == []
