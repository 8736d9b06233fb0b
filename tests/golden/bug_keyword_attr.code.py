


def forward(self, x):
    lambda_1 = self.lambda(x);  x = None
    return lambda_1
    