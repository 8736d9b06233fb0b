


def forward(self, x, n):
    getitem = x[slice(None, 2, None)];  x = None
    getitem_1 = getitem[slice(1, -1, 2)];  getitem = None
    getitem_2 = getitem_1[slice(None, None, None)];  getitem_1 = None
    getitem_3 = getitem_2[slice(n, None, None)];  getitem_2 = None
    getitem_4 = getitem_3[(None, Ellipsis, slice(1, -1, 2))];  getitem_3 = None
    getitem_5 = getitem_4[Ellipsis];  getitem_4 = None
    getitem_6 = getitem_5[(slice(None, None, None), slice(1, 3, None))];  getitem_5 = None
    sl = getitem_6.sl(slice('a', 'b', None), Ellipsis, s = slice(n, n, n));  getitem_6 = n = None
    return sl
    