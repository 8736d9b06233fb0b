


def forward(self, x, y):
    len_1 = len(x)
    max_1 = max(len_1, y);  len_1 = y = None
    min_1 = min(max_1, 3);  max_1 = None
    abs_1 = abs(min_1);  min_1 = None
    hasattr_1 = hasattr(x, 'shape');  x = None
    print_1 = print(abs_1, hasattr_1, sep = ', ');  hasattr_1 = None
    return (abs_1, print_1)
    