


def forward(self, x):
    math_sqrt = torch.relu(x);  x = None
    sqrt = math_sqrt_1(math_sqrt);  math_sqrt = None
    math_floor_1 = torch.neg(sqrt);  sqrt = None
    floor = math_floor(math_floor_1);  math_floor_1 = None
    return floor
    