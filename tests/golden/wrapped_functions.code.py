
torch.fx._symbolic_trace.wrap("math_sqrt")
torch.fx._symbolic_trace.wrap("len")

def forward(self, x):
    sqrt = math_sqrt(x);  x = None
    len_1 = len(sqrt);  sqrt = None
    sqrt_1 = math_sqrt(len_1);  len_1 = None
    relu = torch.relu(sqrt_1);  sqrt_1 = None
    return relu
    