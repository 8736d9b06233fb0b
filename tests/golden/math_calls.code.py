


def forward(self, x):
    sqrt = math_sqrt(x);  x = None
    pow_1 = math_pow(sqrt, 2);  sqrt = None
    floor = math_floor(pow_1);  pow_1 = None
    exp = math_exp(floor);  floor = None
    sqrt_1 = math_sqrt(exp);  exp = None
    log = math_log(sqrt_1, 10);  sqrt_1 = None
    return log
    