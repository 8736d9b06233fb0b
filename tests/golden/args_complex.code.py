


def forward(self, x):
    cplx = x.cplx((1+2j), 2j, (1.5-2.5j), -1j, (-0+1j), 1e+20j, (inf+nanj), z = (1+2j));  x = None
    mul = cplx * (1+2j);  cplx = None
    return mul
    