class Leafy(torch.nn.Module):
    def forward(self, x):
        
        # No stacktrace found for following nodes 
        block = self.block(x);  x = None
        head = self.head(block);  block = None
        return head
        