package dynamostore_test

func runChild(string) int { return 2 }
