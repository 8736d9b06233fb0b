class MLP(torch.nn.Module):
    def forward(self, x):
        
        # No stacktrace found for following nodes 
        fc1 = self.fc1(x);  x = None
        relu = torch.nn.functional.relu(fc1, inplace = False);  fc1 = None
        drop = self.drop(relu);  relu = None
        fc2 = self.fc2(drop);  drop = None
        relu_1 = torch.relu(fc2);  fc2 = None
        dropout = torch.nn.functional.dropout(relu_1, p = 0.2, training = False, inplace = False);  relu_1 = None
        fc3 = self.fc3(dropout);  dropout = None
        softmax = fc3.softmax(dim = -1);  fc3 = None
        return softmax
        