


def forward(self, x):
    getattr_1 = x.shape
    getattr_2 = getattr(x, 'my attr')
    getattr_3 = getattr(x, 'shape', None)
    getattr_4 = getattr(x, '0')
    getattr_5 = getattr_1.T
    getattr_6 = getattr(x, getattr_2);  x = None
    return (getattr_1, getattr_2, getattr_3, getattr_4, getattr_5, getattr_6)
    