


def forward(self, idx, vol):
    emb = self.emb(idx);  idx = None
    transpose = emb.transpose(1, 2);  emb = None
    conv1d = self.conv1d(transpose);  transpose = None
    bn1d = self.bn1d(conv1d);  conv1d = None
    transpose_1 = bn1d.transpose(1, 2);  bn1d = None
    blocks_0 = getattr(self.blocks, "0")(transpose_1);  transpose_1 = None
    blocks_1 = getattr(self.blocks, "1")(blocks_0);  blocks_0 = None
    blocks_2 = getattr(self.blocks, "2")(blocks_1);  blocks_1 = None
    conv3d = self.conv3d(vol);  vol = None
    bn3d = self.bn3d(conv3d);  conv3d = None
    sum_1 = bn3d.sum(dim = 2);  bn3d = None
    pool = self.pool(sum_1);  sum_1 = None
    mean = blocks_2.mean(dim = 1);  blocks_2 = None
    flat = self.flat(pool);  pool = None
    return (mean, flat)
    